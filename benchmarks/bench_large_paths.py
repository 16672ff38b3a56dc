"""Time and peak memory of the paths through a large trace other than the whole analysis
(issue 42): a trace cut short (a profiler killed mid-write), the same as a cut gzip, a whole
trace with one bare ``NaN`` half way (read as a cut file before), ``--augment`` of the whole
trace. Each is the whole ``infer-opt trace FILE --json`` in a fresh process: wall seconds and
peak RSS.

    python benchmarks/bench_large_paths.py [--gb 0.7] [--cut 0.7]

The synthetic trace is ``bench_trace_speed.synthetic``'s (Kineto-like events), written to /tmp.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_trace_speed import OURS, synthetic, timed


def _cut_copy(src: Path, dst: Path, fraction: float) -> None:
    size = int(src.stat().st_size * fraction)
    with open(src, "rb") as a, open(dst, "wb") as b:
        shutil.copyfileobj(a, b, 1 << 24)
        b.truncate(size)


def _cut_gzip(src: Path, dst: Path, fraction: float) -> None:
    """A gzip of ``src`` cut at ``fraction`` of its compressed size (streamed, bounded memory)."""
    with open(src, "rb") as a, gzip.open(dst, "wb", compresslevel=1) as b:
        shutil.copyfileobj(a, b, 1 << 24)
    with open(dst, "r+b") as f:
        f.truncate(int(dst.stat().st_size * fraction))


def _with_nan(src: Path, dst: Path) -> None:
    """``src`` with one kernel's ``"dur":7.75`` half way written as a bare NaN."""
    half = src.stat().st_size // 2
    with open(src, "rb") as a, open(dst, "wb") as b:
        b.write(a.read(half))
        rest = a.read()
        old = b'"dur":7.75'  # (orjson writes no spaces)
        at = rest.find(old)
        assert at >= 0, "no kernel duration to replace"
        b.write(rest[:at] + b'"dur":NaN' + rest[at + len(old) :])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=0.7)
    parser.add_argument("--cut", type=float, default=0.7)
    parser.add_argument("--only", default="", help="run the cases whose label contains this")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        whole = Path(tmp) / "whole.json"
        synthetic(whole, args.gb)
        cases = {
            "cut short": (Path(tmp) / "cut.json", lambda d: _cut_copy(whole, d, args.cut)),
            "cut gzip": (Path(tmp) / "cut.json.gz", lambda d: _cut_gzip(whole, d, args.cut)),
            "one NaN half way": (Path(tmp) / "nan.json", lambda d: _with_nan(whole, d)),
        }
        print(f"synthetic trace {whole.stat().st_size / 2**30:.2f} GiB; cut at {args.cut:.0%}")
        augmented = Path(tmp) / "augmented.json.gz"
        cases["--augment (whole)"] = (whole, lambda d: None)
        for label, (path, make) in cases.items():
            if args.only not in label:
                continue
            make(path)
            more = ["--augment", str(augmented)] if label.startswith("--augment") else []
            wall, rss, _ = timed([sys.executable, "-c", OURS, "trace", str(path), "--json", *more])
            size = path.stat().st_size / 2**20
            print(f"{label:>18}: {wall:6.1f} s, peak RSS {rss:5.2f} GiB ({size:.0f} MB file)")
            path.unlink()


if __name__ == "__main__":
    main()
