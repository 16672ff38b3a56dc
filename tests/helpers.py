"""Shared test helpers: run the CLI in-process and read its JSON result."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from typer.testing import CliRunner

from infer_opt.cli.app import app


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        return json.loads(self.stdout)


def invoke(*args: str, input: str | None = None) -> Run:
    """Run ``infer-opt ARGS`` in-process; stdout and stderr kept apart. torch's thread count,
    which a command may set (--threads, validate's calibration's), is put back after it."""
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    runner = CliRunner()
    try:
        result = runner.invoke(app, list(args), input=input, env={"COLUMNS": "200"})
    finally:
        if torch is not None and threads is not None:
            torch.set_num_threads(threads)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Run(result.exit_code, result.stdout, result.stderr)


def assert_one_line_error(run: Run, *needles: str) -> None:
    """Exit code 2, a single 'Error: ...' line naming what was wrong, no traceback."""
    assert run.exit_code == 2, (run.exit_code, run.stdout, run.stderr)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("Error: "), lines[0]
    assert "Traceback" not in run.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


HEAVY_MODULES = ("torch", "pandas", "matplotlib", "scipy")


def heavy_modules_imported(*argvs: list[str]) -> list[str]:
    """Run each ``infer-opt ARGV`` in one fresh interpreter (each must exit 0) and return
    which of torch, pandas, matplotlib and scipy ended up imported."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from infer_opt.cli.app import app\n"
        f"for argv in {[list(a) for a in argvs]!r}:\n"
        "    try:\n"
        "        app(argv)\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code in (0, None), (argv, exc.code)\n"
        f"print('HEAVY:' + ','.join(m for m in {HEAVY_MODULES!r} if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("HEAVY:"), proc.stdout
    return [m for m in last.removeprefix("HEAVY:").split(",") if m]


def parse_command_line(argv: list[str]) -> Any:
    """Parse ``infer-opt ARGV`` as a run would — each option converted by its type, a stray
    argument or unknown option refused — without running any command body (click's
    ``make_context`` down the command groups). Returns the innermost click context; a bad
    command line raises click's ``UsageError`` (or a subclass)."""
    import typer.main

    root = typer.main.get_command(app)
    ctx = root.make_context("infer-opt", list(argv))
    rest = [*ctx._protected_args, *ctx.args]
    while rest:
        name, command, args = ctx.command.resolve_command(ctx, rest)
        ctx = command.make_context(name, args, parent=ctx)
        rest = [*ctx._protected_args, *ctx.args]
    return ctx


def usable_fit(device: str = "cpu", dtype: str = "float32", **changes: Any) -> Any:
    """A hand-made roofline fit (R = 100 GFLOP/s, b = 10 GB/s, t0 = 1 µs, median error 5%
    over 18 kernels) keyed for a run on ``device`` in ``dtype`` as torch is set now (threads,
    matmul precision, the profile's timing), so it passes the cache's validation."""
    from dataclasses import replace

    from infer_opt.cost_models.roofline import PROFILE_TIMINGS
    from infer_opt.profilers.device import run_key
    from infer_opt.results.roofline import RooflineFit

    key = run_key(device, dtype, PROFILE_TIMINGS[device.split(":")[0]][0])
    fit = RooflineFit(
        compute_rate_flops=100e9,
        bandwidth_bytes_per_s=10e9,
        launch_overhead_s=1e-6,
        median_abs_rel_error=0.05,
        n_points=18,
        n_fitted=18,
        device=device,
        dtype=key.dtype,
        device_name=key.device_name,
        device_key=key.device_slug(),
        threads=key.threads,
        matmul_precision=key.matmul_precision,
        timing=key.timing,
    )
    return replace(fit, **changes)
