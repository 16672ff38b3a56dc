"""The calibration cache (issue 33, classes 5 and 6): checked writable before any measurement
(an error before the work, never a traceback after it), written under a lock, and two runs
saving the same key never silently lose one (the other's file is kept aside and said)."""

from __future__ import annotations

import errno
import json
import threading
from dataclasses import replace

import pytest

from infer_opt import store as rs
from infer_opt.errors import InvalidInput
from infer_opt.profilers import calibration as cal
from infer_opt.results import load_result
from tests.helpers import assert_one_line_error, invoke
from tests.profilers.synthetic_calibration import synthetic_calibration


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(rs.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def unwritable(tmp_path, monkeypatch):
    """A cache folder that cannot be made (its parent is a file: refused even to root)."""
    (tmp_path / "a-file").write_text("x")
    monkeypatch.setenv(rs.CACHE_ENV, str(tmp_path / "a-file" / "cache"))


def _store() -> rs.Store:
    return rs.Store("calibration", type(synthetic_calibration()), lambda *_: ())


def test_a_writable_cache_passes_and_is_made(cache):
    assert rs.check_writable("roofline") == cache / "roofline" and (cache / "roofline").is_dir()
    assert not list((cache / "roofline").iterdir())  # the probe file is gone


def test_an_unwritable_cache_is_an_error_naming_it(unwritable):
    with pytest.raises(InvalidInput, match=r"the cache cannot be written .*nothing was measured") as caught:
        rs.check_writable("calibration", instead="give --no-save")
    assert caught.value.option == rs.CACHE_ENV and "give --no-save" in str(caught.value)


@pytest.mark.parametrize(
    ("argv", "measure"),
    [
        (["roofline", "--threads", "1"], "infer_opt.profilers.roofline._measure_now"),
        (["calibrate", "--shapes", "tiny", "--threads", "1"], "infer_opt.profilers.calibration.calibrate"),
    ],
)
def test_calibrate_and_roofline_refuse_an_unwritable_cache_before_measuring(
    unwritable, monkeypatch, argv, measure
):
    def measured(*_args, **_kwargs):
        raise AssertionError("measured before checking the cache")

    monkeypatch.setattr(measure, measured)
    assert_one_line_error(invoke(*argv), "INFER_OPT_CACHE", "cannot be written")


def test_roofline_with_no_save_needs_no_cache(unwritable, monkeypatch, tmp_path):
    points = tmp_path / "p.csv"
    points.write_text("name,flops,bytes,time_s\na,1e6,1e3,1e-5\nb,1e3,1e6,1e-5\nc,1,1,1e-6\n")
    run = invoke("roofline", str(points), "--no-save")
    assert run.exit_code == 0, run.stderr


def test_a_cache_that_fails_mid_run_keeps_the_run_going(cache, monkeypatch):
    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(rs, "save_result", full)
    stored = cal.cache_calibration(synthetic_calibration(families=True))
    assert not stored.saved and stored.notices[0].code == "calibration_cache_not_written"
    assert stored.notices[0]["reason"] == "No space left on device"


def test_another_runs_file_is_kept_aside_and_said(cache):
    """Run A watches its file and measures; run B saves first; A's save keeps B's aside."""
    first, second = _store(), _store()
    a_result = synthetic_calibration(families=True)
    b_result = replace(a_result, wall_s=2.0)
    path = first.path(first.key_of(a_result))
    first.watch(path)
    assert second.save(b_result).notices == ()
    stored = first.save(a_result)
    (notice,) = stored.notices
    assert notice.code == "calibration_cache_concurrent" and notice["path"] == str(path)
    kept = path.with_name(path.name.removesuffix(".json") + ".other.json")
    assert notice["kept"] == str(kept)
    assert load_result(path).result == a_result and load_result(kept).result == b_result
    # A saves again: its own file, nothing to say; B saves again: A's kept, said once to B
    assert first.save(a_result).notices == ()
    assert second.save(b_result).notices[0].code == "calibration_cache_concurrent"
    assert load_result(kept).result == a_result and load_result(path).result == b_result
    assert second.save(b_result).notices == ()


def test_a_run_alone_never_moves_its_own_file(cache):
    store = _store()
    result = synthetic_calibration(families=True)
    store.watch(store.path(store.key_of(result)))
    for wall in (1.0, 2.0, 3.0):
        assert store.save(replace(result, wall_s=wall)).notices == ()
    assert not list(cache.glob("**/*.other.json"))


def test_saves_from_two_threads_take_turns_and_leave_a_whole_file(cache):
    """Both runs watch the file before they measure (as calibrate does), then save in turns."""
    result = synthetic_calibration(families=True)
    errors: list[BaseException] = []
    started = threading.Barrier(2)

    def run(wall: float) -> None:
        store = _store()
        store.watch(store.path(store.key_of(result)))
        started.wait()
        try:
            for _ in range(15):
                store.save(replace(result, wall_s=wall))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in (1.0, 2.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    path = _store().path(_store().key_of(result))
    both = (path, path.with_name(path.stem + ".other.json"))
    walls = {json.loads(p.read_text())["result"]["wall_s"] for p in both}
    assert walls == {1.0, 2.0}  # both runs' calibrations are kept


def test_a_fifo_or_device_in_the_cache_is_never_read_but_moved_aside(cache):
    """The store reads through the one checked reader: a FIFO where a cached file should be is
    not opened (a read would block for ever); it is reported as corrupt and moved aside."""
    import os

    from infer_opt.run_key import RunKey

    store, record = _store(), synthetic_calibration(families=True)
    path = store.path(RunKey.of(record))
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    found = store.load(RunKey.of(record))
    assert found.result is None and found.notices[0].code == "calibration_cache_corrupt"
    assert "not a regular file" in found.notices[0]["reason"] and not path.exists()


def test_every_cached_kind_lives_in_one_store_module():
    """Roofline fits, noise floors, comm sweeps and operator calibrations: one Store each."""
    assert isinstance(rs.ROOFLINE, rs.Store) and isinstance(rs.COMM, rs.Store)
    assert all(isinstance(s, rs.Store) for s in rs.NOISE.values())
    assert isinstance(cal.OPERATORS, rs.Store)
    assert rs.COMM.path("gloo-2ranks-cpu-x").name == "gloo-2ranks-cpu-x.json"
