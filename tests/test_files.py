"""Output files: checked before the work, written atomically (regular files), through symlinks,
in place for FIFOs and devices; the last of two writers wins and a reader never sees half a
file; what cannot be written is kept."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from infer_opt import files
from infer_opt.errors import InvalidInput


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda d: "", "empty path"),
        (lambda d: "   ", "empty path"),
        (lambda d: str(d), "is a directory"),
        (lambda d: str(d / "missing" / "x.json"), "does not exist"),
        (lambda d: str(d / "a-file" / "x.json"), "is not a folder"),
        (lambda d: "/proc/x.json", "cannot create a file"),
        (lambda d: str(d / ("x" * 300)), "File name too long"),
        (lambda d: "-", "stdout"),
    ],
)
def test_unwritable_places_are_refused_naming_the_option(tmp_path, make, needle):
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(InvalidInput) as info:
        files.check_writable(make(tmp_path), "--out")
    assert info.value.option == "--out" and needle in str(info.value)


def test_checking_leaves_nothing_behind(tmp_path):
    files.check_writable(tmp_path / "out.json", "--out")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_a_read_only_folder_is_refused(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(InvalidInput, match="cannot create a file"):
            files.check_writable(folder / "x.json", "--out")
    finally:
        folder.chmod(0o700)


def test_a_regular_file_is_replaced_atomically_with_normal_permissions(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    inode = target.stat().st_ino
    files.write_text(target, "new")
    assert target.read_text() == "new"
    assert target.stat().st_ino != inode  # a new file renamed over the old one
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary left
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~files._umask()


def test_a_symlink_is_written_through_to_its_target(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    files.check_writable(link, "--out")
    files.write_text(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new"


def test_a_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    files.check_writable(fifo, "--out")
    files.write_text(fifo, "through the pipe")
    reader.join(timeout=10)
    assert received == ["through the pipe"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_character_device_is_written_in_place_and_never_replaced():
    files.check_writable("/dev/null", "--out")
    files.write_text("/dev/null", "discarded")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_device_fails_the_write_and_stays_a_device():
    with pytest.raises(OSError):
        files.write_text("/dev/full", "x" * 100_000)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_two_writers_last_wins_and_readers_never_see_half_a_file(tmp_path):
    target = tmp_path / "out.json"
    payloads = [json.dumps({"writer": w, "data": "x" * 200_000}) for w in range(2)]
    target.write_text(payloads[0])
    torn: list[str] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            text = target.read_text()
            if text not in payloads:
                torn.append(text[:50])

    def write(payload: str) -> None:
        for _ in range(40):
            files.write_text(target, payload)

    reader = threading.Thread(target=read)
    writers = [threading.Thread(target=write, args=(p,)) for p in payloads]
    reader.start()
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    stop.set()
    reader.join()
    assert torn == []
    assert target.read_text() in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_failed_write_removes_its_temporary_file(tmp_path, monkeypatch):
    def fail(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        files.write_text(tmp_path / "out.json", "text")
    assert list(tmp_path.iterdir()) == []


def test_keep_unsaved_puts_the_text_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(files.CACHE_ENV, str(tmp_path))
    kept = files.keep_unsaved("amdahl.json", "{}")
    assert kept.parent == tmp_path / "unsaved" and kept.read_text() == "{}"
    assert kept.name.endswith("-amdahl.json")


# ---------------------------------------------------------------------------- the one reader


@pytest.mark.parametrize("kind", ["fifo", "device", "too large", "missing", "not text"])
def test_the_reader_refuses_what_is_no_input_file_naming_the_option(tmp_path, monkeypatch, kind):
    """A FIFO (a read that never ends), a device (one that never ends, or fills memory), a file
    over the size limit, a missing or non-UTF-8 one: one line naming the option, nothing read."""
    path = tmp_path / "input.csv"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    elif kind == "too large":
        path.write_text("a,b\n1,2\n")
        monkeypatch.setattr(files, "MAX_INPUT_BYTES", 4)
    elif kind == "not text":
        path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InvalidInput) as err:
        files.read_text(path, "--lengths")
    assert err.value.option == "--lengths" and err.value.value == str(path)
    assert "\n" not in str(err.value)
    expected = {
        "fifo": "not a regular file",
        "device": "not a regular file",
        "too large": "bytes; input files",
    }
    assert expected.get(kind, {"missing": "does not exist", "not text": "not a UTF-8"}.get(kind)) in str(
        err.value
    )
