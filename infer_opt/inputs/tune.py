"""Reading what ``tune`` takes: a batch-size distribution (CSV/TSV ``batch_size,count``), a cost
curve (CSV/TSV ``batch_size,time_ms`` or ``tokens,time_ms``, a saved ``predict --sweep
batch=...`` result, or saved ``trace`` results at two or more batch sizes), a graph-memory table
(``batch_size,bytes``). Tables go through :func:`infer_opt.inputs.tables.read_table`.

A trace result is one point of the curve: the median ProfilerStep span it measured, at the batch
size the user says it ran at (``FILE@B``; a trace does not record it). One point cannot say how
the step grows with the batch — which is all padding and capture choices turn on — so a curve
from a single trace is refused rather than drawn flat."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from infer_opt.cost_models import capture_sizes as cs
from infer_opt.errors import InvalidInput
from infer_opt.files import read_text
from infer_opt.inputs.tables import Field, read_table
from infer_opt.notices import Notice

_SIZE_ALIASES = ("tokens", "batch", "bs", "num_tokens")


def read_distribution(path: Path, param: str = "batches") -> tuple[cs.Distribution, tuple[Notice, ...]]:
    """``batch_size[,count]`` rows (no count: each row is one step)."""
    fields = (
        Field("batch_size", "number", low=1, aliases=_SIZE_ALIASES),
        Field("count", "number", required=False, low=0),
    )
    table = read_table(read_text(path, param), fields, source=path.name)
    if len(table) == 0:
        raise InvalidInput(param, str(path), "the batch-size distribution is empty")
    frame = table.frame
    counts = frame["count"].to_numpy() if table.has("count") else np.ones(len(frame))
    return cs.distribution(frame["batch_size"].to_numpy(), counts, source=path.name), table.notices()


def read_cost(path: Path, param: str = "cost") -> tuple[cs.CostCurve, str, tuple[Notice, ...]]:
    """A cost curve and how it was obtained ("measured table" / "predicted (predict --sweep)")."""
    if path.suffix.lower() == ".json":
        return _cost_from_result(path, param)
    fields = (
        Field("batch_size", "number", low=1, aliases=_SIZE_ALIASES),
        Field("time", "duration", unit="ms", low=0, low_open=True, aliases=("step",)),
    )
    table = read_table(read_text(path, param), fields, source=path.name)
    frame = table.frame
    curve = cs.cost_curve(frame["batch_size"].to_numpy(), frame["time"].to_numpy(), source=path.name)
    return curve, f"table {path.name} (as given)", table.notices()


def _cost_from_result(path: Path, param: str) -> tuple[cs.CostCurve, str, tuple[Notice, ...]]:
    from infer_opt.results import load_result

    expected = "a CSV/TSV cost table, a predict --sweep batch result or trace results as FILE@B"
    loaded = load_result(path, expect=("predict", "trace"), option=param, what=expected)
    if loaded.kind == "trace":
        raise InvalidInput(param, str(path), _ONE_POINT)
    result = loaded.result
    if result.sweep != "batch" or not result.points:
        raise InvalidInput(
            param, str(path), "a predict result must be a sweep over batch (predict --sweep batch=...)"
        )
    sizes = [p.batch for p in result.points]
    times = [p.step_time_s for p in result.points]
    curve = cs.cost_curve(sizes, times, source=path.name)
    return curve, f"predicted by infer-opt predict ({path.name}; estimated, not measured)", ()


# ----------------------------------------------------------------------------- trace results

_ONE_POINT = (
    "a trace result is one point of the cost curve (its step time at one batch size, which the "
    "trace does not record): give trace results at two or more batch sizes as "
    "--cost-file FILE@B --cost-file FILE@B, or a cost table"
)


def read_costs(
    sources: Sequence[tuple[Path, int | None]], param: str = "cost"
) -> tuple[cs.CostCurve, str, tuple[Notice, ...]]:
    """The cost curve from ``--cost-file`` as given: one table or ``predict`` result (``B`` None), or
    trace results each with the batch size ``B`` it ran at."""
    if not sources:
        raise InvalidInput(
            param, "missing", "give --cost-file FILE (a table, a predict result, or trace results)"
        )
    if len(sources) == 1 and sources[0][1] is None:
        return read_cost(sources[0][0], param)
    bare = [str(p) for p, b in sources if b is None]
    if bare:
        raise InvalidInput(
            param,
            bare[0],
            "with several --cost-file files each must be a trace result with its batch size, FILE@B",
        )
    return read_trace_costs([(p, int(b)) for p, b in sources if b is not None], param)


def read_trace_costs(
    points: Sequence[tuple[Path, int]], param: str = "cost"
) -> tuple[cs.CostCurve, str, tuple[Notice, ...]]:
    """One point per trace result: ``(B, median ProfilerStep span)``; two batch sizes at least."""
    from infer_opt.files import same_file_key

    sizes: list[int] = []
    times: list[float] = []
    files: dict[str, int] = {}
    for path, batch in points:
        if batch in sizes:
            expected = f"a second trace result at batch {batch}; give one per batch size"
            raise InvalidInput(param, f"{path}@{batch}", expected)
        earlier = files.setdefault(same_file_key(path), batch)
        if earlier != batch:  # one measurement at two sizes: a flat curve no run measured
            expected = f"also given at batch {earlier}: one trace result ran at one batch size"
            raise InvalidInput(param, f"{path}@{batch}", expected)
        times.append(trace_step_time(load_trace_result(path, param), path, param))
        sizes.append(batch)
    if len(set(sizes)) < 2:
        path, batch = points[0]
        raise InvalidInput(
            param,
            f"{path}@{batch}",
            f"only batch {batch} measured ({times[0] * 1e3:.4g} ms per step); " + _ONE_POINT,
        )
    order = np.argsort(sizes)
    listed = ", ".join(f"{sizes[i]}: {times[i] * 1e3:.4g} ms" for i in order)
    names = ", ".join(p.name for p, _ in points)
    curve = cs.cost_curve(sizes, times, source=names)
    label = (
        f"measured: {len(points)} trace results ({listed}; median ProfilerStep span of the slowest "
        f"rank, idle gaps included; batch sizes as given with @B)"
    )
    return curve, label, ()


def load_trace_result(path: Path, param: str = "cost") -> Any:
    """A saved ``trace`` result (``FILE@B``)."""
    from infer_opt.results import load_result

    if path.suffix.lower() != ".json":
        raise InvalidInput(
            param,
            str(path),
            "FILE@B takes a saved trace result (.json); a table gives its batch sizes in a column",
        )
    return load_result(path, expect=("trace",), option=param, what="a saved trace result (FILE@B)").result


def trace_step_time(result: Any, path: Path, param: str = "cost") -> float:
    """The step time a trace result measured: per rank the median span of its ProfilerStep
    windows; over ranks the largest (a step ends when its slowest rank does)."""
    medians = []
    for rank in result.ranks:
        spans = [s.span_s for s in rank.steps if s.step is not None and s.span_s > 0]
        if spans:
            medians.append(float(np.median(spans)))
    if not medians:
        raise InvalidInput(
            param,
            str(path),
            "the trace has no ProfilerStep windows, so no per-step time (record it with "
            "torch.profiler's schedule and prof.step())",
        )
    return max(medians)


def read_memory(path: Path, param: str = "memory") -> tuple[np.ndarray, np.ndarray]:
    """``batch_size,bytes`` rows: measured graph memory per captured size."""
    fields = (
        Field("batch_size", "number", low=1, aliases=_SIZE_ALIASES),
        Field("bytes", "number", low=0, aliases=("memory_bytes", "memory")),
    )
    frame = read_table(read_text(path, param), fields, source=path.name).frame.sort_values("batch_size")
    if len(frame) == 0:
        raise InvalidInput(param, str(path), "the memory table is empty")
    return frame["batch_size"].to_numpy(dtype=float), frame["bytes"].to_numpy(dtype=float)


def window(after: Path | None, before: Path | None) -> list[Path] | None:
    """The snapshots ``--prometheus AFTER --before BEFORE`` name, the earlier first."""
    if after is None and before is not None:
        raise InvalidInput("--before", str(before), "applies to --prometheus files only")
    return None if after is None else [p for p in (before, after) if p is not None]


def batch_distribution(batches: Path | None, prometheus: list[Path] | None) -> dict[str, Any]:
    """The batch sizes seen, from ``--batches`` or the ``--prometheus`` window (one of them)."""
    if (batches is None) == (not prometheus):
        raise InvalidInput(
            "--batches",
            "missing" if batches is None else str(batches),
            "give --batches FILE or --prometheus SNAPSHOT, one of them",
        )
    if batches is not None:
        dist, notices = read_distribution(batches)
        return {"dist": dist, "notices": notices, "label": f"{batches.name} (as given)"}
    return read_histogram(prometheus)


# ----------------------------------------------------------------------------- Prometheus snapshots


def read_histogram(paths: Sequence[Path], param: str = "--prometheus") -> dict[str, Any]:
    """The batch sizes of one ``/metrics`` snapshot's ``vllm:iteration_tokens_total`` histogram, or
    of the window between two (BEFORE AFTER), placed at each bucket's upper and lower edge
    (:func:`capture_sizes.histogram_distributions`)."""
    from infer_opt.inputs import prometheus as prom

    hists = [prom.histogram_from_text(read_text(p, param), source=p.name) for p in paths]
    hist = hists[0] if len(hists) == 1 else prom.histogram_interval(hists[0], hists[1], source=paths[0].name)
    hi, lo, overflow = cs.histogram_distributions(hist, source=paths[-1].name)
    names = ", ".join(p.name for p in paths)
    label = f"{prom.ITERATION_TOKENS} histogram of {names} (coarse: estimated placement)"
    return {"dist": hi, "dist_low": lo, "overflow_share": overflow, "notices": (), "label": label}


def alphas_from_prometheus(
    before: Path, after: Path, param: str = "--prometheus"
) -> tuple[tuple[float, ...], str]:
    """The conditional acceptance rates α_i vLLM's counters measured between two snapshots, up to
    the first position never accepted, and where they came from."""
    from infer_opt.inputs.prometheus import metrics_from_prometheus

    try:
        metrics = metrics_from_prometheus(after, before=before)
    except InvalidInput as exc:
        if exc.option in ("before", "prometheus"):  # the earlier snapshot is --before's file
            option = "--before" if exc.option == "before" else param
            raise InvalidInput(option, exc.value, exc.expected) from None
        raise
    rates = []
    for pos in metrics.positions:
        if pos.conditional is None:
            break
        rates.append(pos.conditional)
    if not rates:
        raise InvalidInput(param, str(after), "no draft position was ever accepted: no rates to tune with")
    return tuple(rates), f"measured: vLLM counters between {before.name} and {after.name}"
