"""The speculative commands' inputs: vectors, plan logs and counter files, read without the CLI."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from infer_opt.errors import InvalidInput
from infer_opt.inputs import speculative as si


def test_a_vector_from_npy_or_text(tmp_path):
    np.save(tmp_path / "p.npy", np.array([0.5, 0.5]))
    (tmp_path / "q.csv").write_text("q\n0.25, 0.75\n")
    assert si.read_vector(tmp_path / "p.npy", "--p-file") == [0.5, 0.5]
    assert si.read_vector(tmp_path / "q.csv", "--q-file") == [0.25, 0.75]


def test_a_fifo_named_npy_is_refused_before_numpy_opens_it(tmp_path):
    path = tmp_path / "p.npy"
    os.mkfifo(path)
    with pytest.raises(InvalidInput, match="not a regular file") as err:
        si.read_vector(path, "--p-file")
    assert err.value.option == "--p-file"


def test_counters_take_vllms_names(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"vllm:spec_decode_num_drafts": 10, "num_accepted_tokens_per_pos": [8, 5]}')
    assert si.read_metrics(path) == {"drafts": 10, "accepted_per_position": [8, 5]}


def test_a_plan_log_without_rows_is_refused(tmp_path):
    path = tmp_path / "rounds.csv"
    path.write_text("plan,time,tokens\n")
    with pytest.raises(InvalidInput, match="no data rows"):
        si.read_plan_log(path)


@pytest.mark.parametrize("drafts", [1e308, 2.0**53 + 2, -1, 0.5])
def test_a_counter_file_holding_what_no_count_can_be_is_refused(tmp_path, drafts):
    """A count past 2^53 (1e308 drafts) is no count: refused as the CLI's --drafts refuses it."""
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"drafts": drafts, "accepted_per_position": [10, 5]}))
    with pytest.raises(InvalidInput, match=r"whole numbers in \[0, 2\^53\]"):
        si.read_metrics(path)
