"""``infer-opt profile``: where one model step's time goes, per operator, against the roofline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from infer_opt.cli.common import (
    AutoDtypeOpt,
    DeviceOpt,
    FormatOpt,
    HfConfigOpt,
    JsonOpt,
    MarkdownOpt,
    ModelArg,
    OutOpt,
    PlotOpt,
    check_outputs,
    emit,
)
from infer_opt.cli.kernels import ThreadsOpt
from infer_opt.errors import InvalidInput
from infer_opt.units import parse_int

HELP = """Profile one step of a model: time, FLOPs and bytes per aten operator,
grouped by operator, category and module, each op placed against the device's
fitted roofline, and Amdahl's law over the categories.

coverage = Σ per-op time / step time (the rest is host/launch overhead);
per category f: 1/(1-f) if free, 1/((1-f) + f/s) at its roofline bound.

MODEL: a built-in (tiny, the default; gpt2-small, llama-tiny, llama-small);
a factory, package.module:factory or path/to/file.py:factory, returning
(model, example_inputs) (see examples/my_model.py); or hf:<model_type>,
built from its config with random weights (pip install 'infer-opt\\[hf]').

Examples:

  infer-opt profile

  infer-opt profile gpt2-small --seq-len 256 --top 20 --plot gpt2.png

  infer-opt profile --mode decode --context 256

  infer-opt profile --mode generate --new-tokens 32 --json > gen.json

  infer-opt profile examples/my_model.py:make_model --by module
"""

MODES = ("prefill", "decode", "generate")
GROUPS = ("op", "category", "module")
MAX_SIZE = 1 << 20


def _choice(value: str, choices: tuple[str, ...], option: str) -> str:
    text = value.strip().lower()
    if text not in choices:
        raise InvalidInput(option, value, f"expected one of {', '.join(choices)}")
    return text


def profile(
    model: ModelArg = "tiny",
    device: DeviceOpt = "auto",
    dtype: AutoDtypeOpt = "auto",
    batch: Annotated[str, typer.Option("--batch", help="Batch size B.")] = "1",
    seq_len: Annotated[
        str, typer.Option("--seq-len", help="Sequence length T (prefill; the prompt for generate).")
    ] = "128",
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            help="prefill (a forward over T tokens), decode (one token over a KV cache of --context "
            "tokens) or generate (greedy, --new-tokens tokens: TTFT and time per token).",
        ),
    ] = "prefill",
    context: Annotated[str, typer.Option("--context", help="KV-cache length for --mode decode.")] = "128",
    new_tokens: Annotated[
        str, typer.Option("--new-tokens", help="Tokens to generate for --mode generate.")
    ] = "32",
    warmup: Annotated[str, typer.Option("--warmup", help="Untimed calls before timing.")] = "3",
    reps: Annotated[
        str, typer.Option("--reps", help="Timed repetitions (step timing and operator pass).")
    ] = "20",
    roofline: Annotated[
        Path | None,
        typer.Option(
            "--roofline",
            help="Roofline fit to use (from infer-opt roofline --out). Default: the fit saved for "
            "this device and dtype, else a ~10 s calibration now (then saved).",
        ),
    ] = None,
    top: Annotated[str, typer.Option("--top", help="Rows in the operator table.")] = "15",
    by: Annotated[str, typer.Option("--by", help="Main table: op (with shapes), category or module.")] = "op",
    trace: Annotated[
        Path | None,
        typer.Option("--trace", help="Write the raw torch.profiler trace (Chrome/Perfetto JSON)."),
    ] = None,
    threads: ThreadsOpt = None,
    hf_config: HfConfigOpt = None,
    json_out: JsonOpt = False,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    fmt: FormatOpt = None,
    plot: PlotOpt = None,
) -> None:
    from infer_opt.profilers import device as devices
    from infer_opt.profilers import model_profile, models

    mode_ = _choice(mode, MODES, "--mode")
    by_ = _choice(by, GROUPS, "--by")
    sizes = {
        "batch": parse_int(batch, option="--batch", low=1, high=MAX_SIZE),
        "seq_len": parse_int(seq_len, option="--seq-len", low=1, high=MAX_SIZE),
        "context": parse_int(context, option="--context", low=0, high=MAX_SIZE),
        "new_tokens": parse_int(new_tokens, option="--new-tokens", low=1, high=MAX_SIZE),
    }
    n_warmup = parse_int(warmup, option="--warmup", low=0, high=10_000)
    n_reps = parse_int(reps, option="--reps", low=1, high=10_000)
    n_top = parse_int(top, option="--top", low=1, high=10_000)
    check_outputs(out, plot)
    overrides = models.parse_hf_overrides(hf_config or [])
    n_threads = None if threads is None else parse_int(threads, option="--threads", low=1, high=4096)
    dev = devices.resolve_device(device)
    if n_threads is not None:
        devices.set_threads(n_threads)  # before the roofline lookup: the CPU fit is per thread count
    torch_dtype = devices.parse_dtype(dtype, dev)

    from infer_opt.cli.kernels import progress_bar

    with progress_bar("profile") as update:
        update(0, 1, f"loading {model}")
        with model_profile.guard(f"building model {model}"):
            loaded = models.load_model(
                model,
                batch_size=sizes["batch"],
                seq_len=sizes["seq_len"],
                device=dev,
                dtype=torch_dtype,
                hf_overrides=overrides,
            )
        resolved = model_profile.resolve_fit(dev, torch_dtype, roofline, progress=update)
        result = model_profile.profile_model(
            loaded,
            device=dev,
            dtype=torch_dtype,
            mode=mode_,
            context=sizes["context"],
            new_tokens=sizes["new_tokens"],
            warmup=n_warmup,
            reps=n_reps,
            fit=resolved.fit,
            fit_source=resolved.source,
            fit_warnings=resolved.warnings,
            trace_path=trace,
            top=n_top,
            group_by=by_,
            progress=update,
        )
    if trace is not None:
        typer.echo(f"wrote {trace}", err=True)
    emit(result, json_out=json_out, out=out, markdown=markdown, fmt=fmt, plot=plot, plot_fn=_plot)


def _plot(result: Any, path: Path) -> list[Path]:
    """``FILE.png`` (time by category, Amdahl predictions) and ``FILE-roofline.png`` (not
    without a roofline fit)."""
    from infer_opt.cost_models.profile_amdahl import roofline_line
    from infer_opt.reports.plots import profile as plots

    if result.roofline is None:  # no fit: the category plot only
        return [plots.plot_categories(result, path)]
    intensities = [o.intensity for o in result.ops if o.intensity and o.flops > 0]
    line = roofline_line(
        result.roofline.compute_rate_flops, result.roofline.bandwidth_bytes_per_s, intensities
    )
    return plots.plot(result, line, path)


def register(app: typer.Typer) -> None:
    app.command("profile", help=HELP)(profile)
