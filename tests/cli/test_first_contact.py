"""First contact (issue 33, class 9): a bare ``predict`` right after the help's own
``calibrate --threads 1`` finds that calibration (it defaulted to this machine's thread count
and failed), and says which thread count the prediction is for."""

from __future__ import annotations

import os

import pytest

from tests.helpers import invoke

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def cache_at_one_thread(tmp_path, monkeypatch):
    """A calibration cached at 1 thread, torch then at 2 (a bare predict's default here)."""
    import torch

    from infer_opt.profilers import calibration as cal
    from tests.profilers.synthetic_calibration import local_calibration

    monkeypatch.setenv("INFER_OPT_CACHE", str(tmp_path / "cache"))
    torch.set_num_threads(1)
    assert cal.cache_calibration(local_calibration()).saved
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(1)


def test_a_bare_predict_uses_the_one_calibration_cached(cache_at_one_thread):
    run = invoke("predict", "tiny", "--json")
    assert run.exit_code == 0, run.stderr
    assert "the one cached at 1 thread(s) is used" in run.stderr


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="--threads 2 needs two cores")
def test_an_explicit_thread_count_is_never_swapped(cache_at_one_thread):
    run = invoke("predict", "tiny", "--threads", "2")
    assert run.exit_code == 2 and "no usable calibration" in run.stderr
