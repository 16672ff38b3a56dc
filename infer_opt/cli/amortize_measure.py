"""``infer-opt amortize measure``: measure compile cost, eager and compiled time per bucket,
then decide which buckets to compile."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from infer_opt.cli.amortize import app
from infer_opt.cli.buckets import parse_bounds, parse_count, read_input
from infer_opt.cli.common import (
    AutoDtypeOpt,
    CsvOpt,
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
from infer_opt.errors import InvalidInput, UnsupportedOnDevice
from infer_opt.units import format_duration, parse_int

MAX_REPS = 10_000
MAX_BATCH = 1 << 16

HELP = (
    "Measure what compiling costs and buys per shape bucket on this device, then decide which "
    "buckets to compile.\n\n"
    "Per bucket: C = first torch.compile(dynamic=False) call - one eager step (+ CUDA graph capture "
    "on a GPU); t_e, t_c = steady medians; break-even n* = C/(t_e - t_c); compile iff "
    "n·(t_e - t_c) - C > 0.\n\n"
    "Each compile is cold (dynamo reset, inductor caches off); the compiler's one-time start-up "
    "(about 10 s on a 2-core CPU) is measured apart, then each bucket takes a few seconds to "
    "compile. Results are saved after every bucket (--out FILE.json); --resume FILE skips the "
    "buckets it already holds.\n\n"
    "Call counts: --calls (one per bucket, in the order listed) or --lengths FILE (one length per "
    "line, or CSV with length[,count]) mapped to the smallest bound >= T, scaled to --requests N; "
    "each call serves one batch.\n\n"
    "MODEL: a built-in (tiny, the default), package.module:factory or path/to/file.py:factory "
    "taking batch_size and seq_len, or hf:<model_type>.\n\n"
    "Examples:\n\n"
    "  infer-opt amortize measure\n\n"
    "  infer-opt amortize measure tiny --bounds 32,64,128 --calls 1000,500,200 --out sweep.json\n\n"
    "  infer-opt amortize measure --resume sweep.json --bounds 32,64,128 --calls 1000,500,200\n\n"
    "  infer-opt amortize measure gpt2-small --device cuda --bounds 128,256 --lengths lengths.txt "
    "--requests 1e6\n"
)


def _buckets(bounds: str, batch_sizes: str) -> tuple[tuple[int, ...], tuple[int, ...], list[Any]]:
    from infer_opt.profilers.compile_measure import BucketSpec

    lengths = parse_bounds(bounds, "--bounds")
    items = [t for t in batch_sizes.replace(" ", "").split(",") if t]
    if not items:
        raise InvalidInput("--batch-sizes", batch_sizes, "expected comma-separated batch sizes, e.g. 1,4")
    batches = tuple(parse_int(t, option="--batch-sizes", low=1, high=MAX_BATCH) for t in items)
    if len(set(batches)) != len(batches):
        raise InvalidInput("--batch-sizes", batch_sizes, "batch sizes must be distinct")
    return lengths, batches, [BucketSpec(b, t) for b in batches for t in lengths]


def _calls(
    calls: str | None, lengths: str | None, requests: str | None, specs: list[Any], bounds: tuple[int, ...]
) -> tuple[dict[str, float] | None, str | None]:
    if calls is not None and lengths is not None:
        raise InvalidInput("--calls", calls, "give --calls or --lengths, not both")
    if requests is not None and lengths is None:
        raise InvalidInput("--requests", requests, "only used with --lengths FILE")
    if calls is not None:
        items = [t for t in calls.replace(" ", "").split(",") if t]
        if len(items) != len(specs):
            names = ", ".join(s.name for s in specs)
            raise InvalidInput("--calls", calls, f"give one call count per bucket ({len(specs)}: {names})")
        counts = [parse_count(t, "--calls", low=0) for t in items]
        return {s.name: float(n) for s, n in zip(specs, counts, strict=True)}, "--calls"
    if lengths is None:
        return None, None
    if len({s.batch for s in specs}) > 1:
        raise InvalidInput("--lengths", lengths, "with --lengths give one --batch-sizes value")
    from infer_opt.cost_models import bucketing
    from infer_opt.profilers.compile_measure import calls_from_sample

    text, source = read_input(lengths, "--lengths")
    sample = bucketing.parse_lengths_text(text, source=source)
    n_req = None if requests is None else parse_count(requests, "--requests", low=0)
    batch = specs[0].batch
    per_bound = calls_from_sample(bounds, sample, batch=batch, requests=n_req)
    how = f"{source} ({sample.total} lengths" + (f", scaled to {n_req} requests" if n_req is not None else "")
    how += f", {batch} per call)" if batch > 1 else ")"
    return {s.name: per_bound[s.seq_len] for s in specs}, how


def _previous(resume: Path | None) -> Any:
    if resume is None:
        return None
    from infer_opt.profilers.compile_measure import AmortizeMeasureResult
    from infer_opt.results import load_result

    if resume.suffix.lower() != ".json":
        raise InvalidInput(
            "--resume", str(resume), "expected the .json file a run wrote with --out FILE.json"
        )
    if not resume.exists():
        raise InvalidInput("--resume", str(resume), "file does not exist")
    try:
        loaded = load_result(resume)
    except InvalidInput as exc:
        raise InvalidInput("--resume", str(resume), exc.expected) from None
    if not isinstance(loaded.result, AmortizeMeasureResult):
        raise InvalidInput("--resume", str(resume), f"not an amortize measure result (kind {loaded.kind})")
    return loaded.result


def _model_key(model: str) -> str:
    if ":" in model:
        return model
    from infer_opt.profilers.models import ALIASES

    return ALIASES.get(model, model)


@app.command("measure", help=HELP)
def measure(
    model: ModelArg = "tiny",
    bounds: Annotated[
        str, typer.Option("--bounds", help="Sequence-length bucket bounds, e.g. 32,64,128.")
    ] = "32,64",
    batch_sizes: Annotated[
        str, typer.Option("--batch-sizes", help="Batch sizes, e.g. 1,4 (buckets = all pairs).")
    ] = "1",
    calls: Annotated[
        str | None,
        typer.Option("--calls", help="Calls per bucket, in bucket order (batch-major), e.g. 1000,500."),
    ] = None,
    lengths: Annotated[
        str | None, typer.Option("--lengths", help="Length sample giving the calls per bucket ('-' = stdin).")
    ] = None,
    requests: Annotated[
        str | None, typer.Option("--requests", help="With --lengths: scale the sample to N requests.")
    ] = None,
    device: DeviceOpt = "auto",
    dtype: AutoDtypeOpt = "auto",
    warmup: Annotated[str, typer.Option("--warmup", help="Untimed calls before each timing.")] = "3",
    reps: Annotated[str, typer.Option("--reps", help="Timed repetitions (eager and compiled).")] = "20",
    backend: Annotated[
        str, typer.Option("--backend", help="torch.compile backend: inductor, eager, aot_eager, cudagraphs.")
    ] = "inductor",
    cuda_graphs: Annotated[
        bool | None,
        typer.Option(
            "--cuda-graphs/--no-cuda-graphs",
            help="Also capture the compiled step in a CUDA graph (default: on for CUDA devices).",
        ),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option("--resume", help="Skip the buckets this saved sweep (JSON) holds; saves back to it."),
    ] = None,
    hf_config: HfConfigOpt = None,
    json_out: JsonOpt = False,
    fmt: FormatOpt = None,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    csv: CsvOpt = None,
    plot: PlotOpt = None,
) -> None:
    seq_bounds, _, specs = _buckets(bounds, batch_sizes)
    call_map, calls_source = _calls(calls, lengths, requests, specs, seq_bounds)
    n_warmup = parse_int(warmup, option="--warmup", low=0, high=MAX_REPS)
    n_reps = parse_int(reps, option="--reps", low=1, high=MAX_REPS)
    backend_ = backend.strip().lower()
    from infer_opt.profilers.compile_measure import BACKENDS

    if backend_ not in BACKENDS:
        raise InvalidInput("--backend", backend, f"expected one of {', '.join(BACKENDS)}")
    check_outputs(out, plot)
    outs = list(out or [])
    previous = _previous(resume)
    if resume is not None and resume not in outs:
        outs.append(resume)

    from infer_opt.cli.kernels import progress_bar, save_partial
    from infer_opt.profilers import compile_measure as cm
    from infer_opt.profilers import device as devices
    from infer_opt.profilers.models import parse_hf_overrides

    dev = devices.resolve_device(device)
    torch_dtype = devices.parse_dtype(dtype, dev)
    graphs = devices.is_cuda(dev) if cuda_graphs is None else cuda_graphs
    if graphs and not devices.is_cuda(dev):
        raise UnsupportedOnDevice(f"--cuda-graphs: CUDA graphs need a CUDA device; this run is on {dev}")
    setup = {
        "model": _model_key(model),
        "device_name": devices.device_name(dev),
        "dtype": devices.dtype_name(torch_dtype),
        "backend": backend_,
    }
    if previous is not None:
        cm.check_resumable(previous, option="--resume", **setup)
    wanted = {s.name for s in specs}
    kept = [r for r in (previous.buckets if previous else ()) if r.bucket in wanted]

    fn = compile_fn()
    startup: list[float] = []
    caches = cm.cache_state(backend_, custom_compiler=fn is not None)

    def result_of(rows: list[Any]) -> Any:
        return cm.build_result(
            rows,
            **setup,
            device=str(dev),
            cuda_graphs=graphs,
            warmup=n_warmup,
            reps=n_reps,
            compile_caches=caches,
            requested=specs,
            calls=call_map,
            calls_source=calls_source,
            compiler_startup_s=startup[0] if startup else None,
        )

    save = save_partial(outs)
    first_new: list[bool] = []

    def on_bucket(rows: list[Any], left: int) -> None:
        save(result_of(rows))
        if not first_new and left:
            first_new.append(True)
            new = rows[len(kept) :]
            eta = cm.estimate_remaining_s(new, left)
            spent = (startup[0] if startup else 0.0) + sum(r.measure_s for r in new)
            typer.echo(
                f"first bucket took {format_duration(rows[-1].measure_s)}; about {format_duration(eta)} more "
                f"for {left} bucket(s), {format_duration(spent + eta)} in all (estimate)",
                err=True,
            )

    if kept:
        typer.echo(f"resuming {resume}: {len(kept)} of {len(specs)} bucket(s) already measured", err=True)
    loader = cm.default_loader(
        model, device=dev, dtype=torch_dtype, hf_overrides=parse_hf_overrides(hf_config or [])
    )
    with progress_bar("amortize measure") as update:
        if len(kept) < len(specs):
            update(0, len(specs) - len(kept), "warming up the compiler (one-time start-up)")
            seconds = cm.warm_up_compiler(dev, backend=backend_, compile_fn=fn)
            startup.extend([] if seconds is None else [seconds])
        rows = cm.measure_sweep(
            specs,
            loader,
            device=dev,
            dtype_name=setup["dtype"],
            warmup=n_warmup,
            reps=n_reps,
            backend=backend_,
            cuda_graphs=graphs,
            compile_fn=fn,
            previous=kept,
            on_bucket=on_bucket,
            progress=update,
        )
    emit(
        result_of(rows),
        json_out=json_out,
        out=outs,
        markdown=markdown,
        csv=csv,
        fmt=fmt,
        plot=plot,
        plot_fn=plot_measured,
    )


def compile_fn() -> Any:
    """The compiler the command uses: ``None`` means ``torch.compile`` (tests replace this to
    avoid minutes of inductor compiles)."""
    return None


def plot_measured(result: Any, path: Path) -> Path:
    """Per-call eager vs compiled time, and the net gain (or break-even calls) per bucket."""
    from infer_opt.reports.plots import measure as plots

    return plots.plot_amortize(result, path)
