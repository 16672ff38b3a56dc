"""Issue 33 classes 1: runs bounded by the machine (rank counts, buffer sizes) and inputs read
only from regular files: refused before any work with one line saying what fits."""

from __future__ import annotations

import os

import pytest

from infer_opt import api, files
from infer_opt.errors import InvalidInput
from tests.helpers import assert_one_line_error, invoke

CORES = os.cpu_count() or 1


@pytest.mark.parametrize(
    ("args", "option", "words"),
    [
        (["comm", "--nproc", str(4 * CORES + 1)], "--nproc", "4 per core"),
        (["comm", "--nproc", "4096"], "--nproc", "fit"),
        (["comm", "--nproc", "2", "--max-size", "100TiB"], "--max-size", "MiB of buffers per rank fit"),
        (["comm", "--max-size", "1e308"], "--max-size", "GiB of memory is available"),
    ],
)
def test_more_than_the_machine_holds_is_refused_saying_what_fits(args, option, words):
    result = invoke(*args, "--no-save")
    assert_one_line_error(result, option, words)


def _special_inputs(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "zero-link"
    link.symlink_to("/dev/zero")
    return ["/dev/zero", str(fifo), str(link)]


def test_every_input_reader_refuses_devices_and_fifos(tmp_path):
    for path in _special_inputs(tmp_path):
        with pytest.raises(InvalidInput, match="not a regular file"):
            files.read_text(path, "file")
        with pytest.raises(InvalidInput, match="not a regular file"):
            api.amortize_buckets(path)
        result = invoke("speculative", "from-metrics", "--prometheus", path)
        assert_one_line_error(result, "--prometheus")
        result = invoke("buckets", path, "--bounds", "8")
        assert_one_line_error(result, "regular file")


def test_an_input_over_the_size_bound_is_refused_before_reading(tmp_path, monkeypatch):
    big = tmp_path / "big.txt"
    big.write_text("1\n" * 100)
    monkeypatch.setattr(files, "MAX_INPUT_BYTES", 10)
    with pytest.raises(InvalidInput, match="at most 10 bytes"):
        files.read_text(big, "file")
