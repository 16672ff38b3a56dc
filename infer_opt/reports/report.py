"""Assembling saved results into one report :class:`~infer_opt.reports.render.Document`:
the "what matters" highlights (failures first), an environment block (device, torch,
CUDA, dtype, date and command of each result) and one section per result with its
figures. Any renderer then formats it (markdown for ``infer-opt report``, HTML with
``--html``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from infer_opt.registry import plotter
from infer_opt.reports.highlights import highlights
from infer_opt.reports.render import Document, Figure, Section
from infer_opt.reports.view import Column, Table, View, build_view
from infer_opt.requests import ReportRequest
from infer_opt.results import LoadedResult


def _device(loaded: LoadedResult) -> str:
    result = loaded.result
    name = getattr(result, "device_name", None) or ""
    device = getattr(result, "device", None)
    if isinstance(device, str) and device and name and device not in name:
        return f"{name} ({device})"
    if name or (isinstance(device, str) and device):
        return name or str(device)
    return "—"


def _dtype(result: Any) -> str:
    dtype = getattr(result, "dtype", None)
    return dtype if isinstance(dtype, str) and dtype else "—"


def _cuda(env: dict[str, Any]) -> str:
    if env.get("cuda_available"):
        return str(env.get("cuda") or "yes")
    return "no" if "cuda_available" in env else "—"


def environment_view(items: Sequence[LoadedResult], titles: Sequence[str], generated: str) -> View:
    """Where and how each result was produced, and the machine if they share one."""
    rows = []
    for i, (loaded, title) in enumerate(zip(items, titles, strict=True), start=1):
        env = loaded.envelope.get("environment") or {}
        rows.append(
            {
                "n": i,
                "title": title,
                "device": _device(loaded),
                "dtype": _dtype(loaded.result),
                "torch": env.get("torch") or "— (not loaded)",
                "cuda": _cuda(env),
                "created": loaded.envelope.get("created") or "—",
            }
        )
    table = Table(
        "Results in this report",
        [
            Column("n", "#"),
            Column("title", "Result", align="left"),
            Column("device", "Device", align="left"),
            Column("dtype", "dtype", align="left"),
            Column("torch", "torch", align="left"),
            Column("cuda", "CUDA", align="left"),
            Column("created", "Created (UTC)", align="left"),
        ],
        rows,
    )
    summary = [("Generated", generated)]
    envs = [loaded.envelope.get("environment") or {} for loaded in items]
    for key, label in (("platform", "Platform"), ("python", "Python"), ("infer_opt", "infer-opt")):
        values = {e.get(key) for e in envs if e.get(key)}
        if len(values) == 1:
            summary.append((label, str(values.pop())))
        elif values:
            summary.append((label, "differs between results: " + ", ".join(sorted(map(str, values)))))
    cpus = {(e.get("processor") or e.get("machine"), e.get("cpu_count")) for e in envs if e.get("cpu_count")}
    if len(cpus) == 1:
        processor, count = cpus.pop()
        summary.append(("CPU", f"{processor or 'unknown'}, {count} logical cores"))
    return View(title="Environment", summary=summary, tables=[table])


def _created(section: Section) -> str:
    return str((section.envelope or {}).get("created") or "")


def build_report(
    items: Sequence[LoadedResult],
    *,
    sources: Sequence[str],
    figures: Sequence[Sequence[Figure]],
    title: str,
    generated: str,
) -> Document:
    """The report of ``items`` (in the order given) with each one's figures."""
    sections = []
    for loaded, source, figs in zip(items, sources, figures, strict=True):
        view = build_view(loaded.result)
        sections.append(Section(view, loaded.result, loaded.envelope, list(figs), source))
    found = [h for s in sections for h in highlights(s.result, s.view)]
    ordered = [h for h in found if h.level == "bad"] + [h for h in found if h.level != "bad"]
    return Document(
        sections=sections,
        title=title,
        highlights=ordered,
        about=environment_view(items, [s.view.title for s in sections], generated),
        commands=[s.command for s in sorted(sections, key=_created) if s.command],
    )


def _figures(
    loaded: list[LoadedResult], titles: list[str], folder: Path, link_prefix: str
) -> list[list[Figure]]:
    """Each result's plot(s), written to ``folder`` as ``NN-<kind>.png`` (+ extras beside)."""
    out: list[list[Figure]] = []
    for i, (item, title) in enumerate(zip(loaded, titles, strict=True), start=1):
        if plotter(item.kind) is None:
            out.append([])
            continue
        base = folder / f"{i:02d}-{item.kind}.png"
        figures = []
        from infer_opt.reports.plots import write_plots

        for path in write_plots(item.result, base):
            extra = path.stem[len(base.stem) :].strip("-_ ")
            caption = f"{title} ({extra})" if extra else title
            figures.append(Figure(path, f"{link_prefix}{path.name}", caption))
        out.append(figures)
    return out


def run(request: ReportRequest, *, plots: Path | tuple[Path, str] | None = None) -> Document:
    """``infer-opt report`` and ``infer_opt.report``: the report of the request's saved results,
    each one's plots written into ``plots`` (a folder, linked by its name; or ``(folder, link
    prefix)``), none when None."""
    import datetime as _dt

    from infer_opt import __version__
    from infer_opt.results import load_result

    loaded = [load_result(p) for p in request.results]
    titles = [build_view(item.result).title for item in loaded]
    if isinstance(plots, Path):
        plots = (plots, f"{plots.name}/")
    figures = [[] for _ in loaded] if plots is None else _figures(loaded, titles, *plots)
    generated = (
        _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC") + f" by infer-opt {__version__}"
    )
    sources = [str(p) for p in request.results]
    return build_report(loaded, sources=sources, figures=figures, title=request.title, generated=generated)
