"""Output paths across every command that writes: refused before the work starts (empty,
a folder, a missing parent or one that is a file, /proc), written safely after it (symlinks
through, FIFOs and devices in place), and a result that cannot be written is kept, exit 1."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from infer_opt.results import save_result
from tests.helpers import assert_one_line_error, invoke
from tests.reports.fixtures import fixture


class WorkStarted(Exception):
    pass


def _refuse(*_args, **_kwargs):
    raise WorkStarted("the work started before the output path was checked")


#: (argv, the function the work starts with); "{...}" are files made by the fixture below
COMMANDS = [
    (["amdahl", "-f", "0.4", "-s", "4"], "infer_opt.cost_models.amdahl.combined"),
    (["buckets", "{lengths}", "--bounds", "64,128"], "infer_opt.cost_models.bucketing.analyze"),
    (["profile", "--seq-len", "8"], "infer_opt.profilers.models.load_model"),
    (["kernels", "--only", "tiny_add"], "infer_opt.profilers.kernels.run_suite"),
    (["roofline", "--no-save"], "infer_opt.profilers.kernels.run_suite"),
    (["amortize", "measure", "--bounds", "8"], "infer_opt.profilers.amortize_measure_sweep.run"),
    (
        ["speculative", "measure", "--target", "tiny"],
        "infer_opt.profilers.speculative_costs.load_pair",
    ),
    (["compare", "{kernels}", "{kernels}"], "infer_opt.cost_models.compare_runs.compare_results"),
]
#: options that write a file, with a good name to use, and the commands that have them
OPTIONS = [
    ("--out", "r.json", None),
    (
        "--markdown",
        "r.md",
        {"amdahl", "buckets", "profile", "kernels", "roofline", "amortize", "speculative", "compare"},
    ),
    ("--csv", "r.csv", {"amdahl", "buckets", "kernels", "roofline", "amortize", "speculative", "compare"}),
    ("--plot", "r.png", {"amdahl", "buckets", "profile", "roofline", "amortize", "speculative", "compare"}),
    ("--trace", "t.json", {"profile"}),
    ("--save", "fit.json", {"roofline"}),
]
BAD_PLACES = {
    "empty": lambda d, name: "",
    "folder": lambda d, name: str(d / "folder"),
    "missing parent": lambda d, name: str(d / "no" / "such" / name),
    "parent is a file": lambda d, name: str(d / "a-file" / name),
    "unwritable": lambda d, name: f"/proc/infer-opt/{name}",
}
NEEDLES = {
    "empty": "empty path",
    "folder": "is a directory",
    "missing parent": "does not exist",
    "parent is a file": "is not a folder",
    "unwritable": "",
}


@pytest.fixture
def place(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "folder").mkdir()
    (tmp_path / "a-file").write_text("x")
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("12\n40\n100\n")
    kernels = save_result(tmp_path / "kernels.json", fixture("kernels"))
    return {"root": str(tmp_path), "lengths": str(lengths), "kernels": str(kernels)}


def _cases():
    for argv, work in COMMANDS:
        for option, name, commands in OPTIONS:
            if commands is not None and argv[0] not in commands:
                continue
            for where in BAD_PLACES:
                yield pytest.param(
                    argv, work, option, name, where, id=f"{' '.join(argv[:2])} {option} {where}"
                )


@pytest.mark.parametrize(("argv", "work", "option", "name", "where"), list(_cases()))
def test_a_bad_output_path_is_refused_before_the_work(monkeypatch, place, argv, work, option, name, where):
    module, _, attr = work.rpartition(".")
    monkeypatch.setattr(f"{module}.{attr}", _refuse)
    target = BAD_PLACES[where](Path(place["root"]), name)
    run = invoke(*[a.format(**place) for a in argv], option, target)
    assert "No such option" not in run.stderr, run.stderr
    needle = "folder" if (where, option) == ("folder", "--trace") else NEEDLES[where]  # --tp takes a folder
    assert_one_line_error(run, option, needle)


def test_report_refuses_its_output_and_its_companions_before_reading(place):
    root = Path(place["root"])
    for target, needle in (
        ("", "empty path"),
        (str(root / "folder"), "is a directory"),
        ("/proc/x/r.md", ""),
    ):
        assert_one_line_error(invoke("report", place["kernels"], "-o", target), "--out", needle)
    (root / "r_assets").write_text("not a folder")
    assert_one_line_error(invoke("report", place["kernels"], "-o", str(root / "r.md")), "--out", "r_assets")
    (root / "s.html").mkdir()
    assert_one_line_error(
        invoke("report", place["kernels"], "-o", str(root / "s.md"), "--html"), "--html", "is a directory"
    )


def test_a_write_that_fails_after_the_work_keeps_the_result(tmp_path, monkeypatch):
    from infer_opt import files

    monkeypatch.setenv("INFER_OPT_CACHE", str(tmp_path / "cache"))
    real = files.write_text

    def full_disk(path, text):
        if str(path).endswith("r.json"):
            raise OSError(28, "No space left on device")
        return real(path, text)

    monkeypatch.setattr(files, "write_text", full_disk)
    run = invoke(
        "amdahl", "-f", "0.4", "-s", "4", "--out", str(tmp_path / "r.json"), "--csv", str(tmp_path / "r.csv")
    )
    assert run.exit_code == 1
    line = run.stderr.strip().splitlines()[-1]
    assert line.startswith("Error: could not write") and "No space left on device" in line
    kept = Path(line.split("kept in ")[1])
    assert kept.parent == tmp_path / "cache" / "unsaved"
    assert json.loads(kept.read_text())["result"]["speedup"] == pytest.approx(1 / 0.7)
    assert (tmp_path / "r.csv").exists()  # the files that could be written were


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_device_keeps_the_result_and_stays_a_device(tmp_path, monkeypatch):
    monkeypatch.setenv("INFER_OPT_CACHE", str(tmp_path))
    run = invoke("amdahl", "-f", "0.4", "-s", "4", "--markdown", "/dev/full")
    assert run.exit_code == 1 and "/dev/full" in run.stderr and "kept in" in run.stderr
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    assert list((tmp_path / "unsaved").iterdir())


def test_report_that_cannot_be_written_is_kept(tmp_path, monkeypatch, place):
    monkeypatch.setenv("INFER_OPT_CACHE", str(tmp_path / "cache"))
    link = tmp_path / "r.md"
    link.symlink_to("/dev/full")
    run = invoke("report", place["kernels"], "-o", str(link), "--no-plots")
    assert run.exit_code == 1 and "kept in" in run.stderr
    assert link.is_symlink()


def test_symlink_and_fifo_outputs_stay_what_they_are(tmp_path):
    target = tmp_path / "real.json"
    link = tmp_path / "link.json"
    link.symlink_to(target)
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    run = invoke("amdahl", "-f", "0.4", "-s", "4", "--out", str(link), "--markdown", str(fifo))
    reader.join(timeout=20)
    assert run.exit_code == 0, run.stderr
    assert link.is_symlink() and json.loads(target.read_text())["schema"] == "infer-opt/amdahl"
    assert stat.S_ISFIFO(fifo.stat().st_mode) and got and "Amdahl" in got[0]


def test_two_commands_writing_the_same_out_leave_one_valid_file(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "same.json"
    code = (
        "import sys\nfrom infer_opt.cli.app import app\n"
        "for _ in range(8):\n"
        "    try:\n        app(['amdahl', '-f', sys.argv[1], '-s', '4', '--out', sys.argv[2]])\n"
        "    except SystemExit:\n        pass\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, f, str(out)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for f in ("0.2", "0.6")
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0
    data = json.loads(out.read_text())
    assert data["result"]["parts"][0]["fraction"] in (0.2, 0.6)
    assert [p.name for p in tmp_path.iterdir()] == ["same.json"]
