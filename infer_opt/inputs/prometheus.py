"""Prometheus samples a serving engine exports (the text its ``/metrics`` serves), read once:
one parser (``prometheus_client``'s own, imported only here: text format 0.0.4, what
``curl <server>/metrics`` gets; HELP/TYPE lines, ``_created`` samples and other metrics ignored),
one refusal of a series given twice in one file (two scrapes concatenated: summed, it would count
twice), and one difference of two snapshots series by series (:func:`restarted`: a series that
went down, or is gone, means the server restarted in between — hidden in a sum when another
engine's went up). Two views over them:

* counters — vLLM's (v1 engine) four speculative-decoding counters, labelled ``model_name`` and
  ``engine``: ``vllm:spec_decode_num_drafts_total`` (draft rounds D),
  ``…_num_draft_tokens_total`` (draft tokens proposed), ``…_num_accepted_tokens_total``
  (accepted A) and ``…_num_accepted_tokens_per_pos_total{position="i"}`` (rounds whose draft at
  0-based position i was accepted, a_i); summed over engines for one model — the only one in the
  file, or the one named by ``model_name``. Then, as ``from-metrics``
  (:func:`speculative.rates_from_counts`): conditional ``α_1 = a_0/D``, ``α_{i+1} = a_i/a_{i-1}``,
  unconditional ``a_i/D``, ``E[N] = 1 + Σ a_i/D`` (= ``1 + A/D``: vLLM adds to both from the same
  count; a disagreement, e.g. a scrape taken between the updates, is reported) and the draft
  acceptance rate ``Σ a_i / draft tokens``;
* histogram — the cumulative buckets of ``vllm:iteration_tokens_total`` (tokens per engine step),
  summed over labels other than ``le``: what ``tune capture-sizes --prometheus`` reads.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from infer_opt.cost_models import speculative as calc
from infer_opt.errors import InvalidInput
from infer_opt.files import read_text
from infer_opt.notices import Notice
from infer_opt.results.speculative import Costs, MetricsResult, MetricsSource
from infer_opt.units import MAX_WHOLE

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
COUNTERS: tuple[str, ...] = (DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POSITION)
MODEL_LABEL = "model_name"
POSITION_LABEL = "position"
ENGINE_LABEL = "engine"
#: what :func:`speculative.rates_from_counts` calls the counts (its other errors are about costs)
_COUNT_PARAMS = frozenset({"drafts", "accepted_per_position", "draft_tokens"})


@dataclass(frozen=True)
class Sample:
    """One sample of a counter we read: its name, labels and value."""

    name: str
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class SpecCounters:
    """The four counters of one model, summed over engines."""

    drafts: int
    draft_tokens: int
    accepted: int
    #: a_0, a_1, ...: accepted count per 0-based draft position
    accepted_per_position: tuple[int, ...]
    model_name: str | None
    engines: tuple[str, ...]
    #: each series summed, as written (``name{labels}``) with its count: what an interval
    #: compares one by one
    series: tuple[tuple[str, int], ...] = ()


def samples(text: str, names: Collection[str], *, source: str, param: str) -> list[Sample]:
    """The samples named ``names`` in a Prometheus text exposition, through ``prometheus_client``'s
    parser; text it cannot parse is an :class:`InvalidInput` naming ``param`` and ``source``."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        return [
            Sample(s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name in names
        ]
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise InvalidInput(param, source, f"not a Prometheus text exposition ({detail})") from None


def series_name(sample: Sample) -> str:
    """The series a sample belongs to, as written: ``name{label="value",...}`` (labels sorted)."""
    labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
    return f"{sample.name}{{{labels}}}"


def refuse_repeated(found: Iterable[Sample], *, source: str, param: str) -> None:
    """A series given twice in one file (two scrapes concatenated) is refused: summed, it would
    count twice."""
    seen: set[str] = set()
    for s in found:
        name = series_name(s)
        if name in seen:
            raise InvalidInput(
                param,
                name,
                f"{source}: this series appears more than once (two scrapes in one file?); "
                "give one snapshot per file",
            )
        seen.add(name)


N = TypeVar("N", int, float)


def restarted(
    before: Sequence[tuple[str, N]],
    after: Sequence[tuple[str, N]],
    totals: Sequence[tuple[str, N, N]] = (),
    *,
    source: str,
    param: str,
) -> None:
    """Refuse an interval across a server restart (``source``: the earlier snapshot): a series of
    ``before`` gone from ``after``, then any count that went down — the ``totals`` (name,
    earlier, later) first, then every series."""
    later = dict(after)
    for name, _ in before:
        if name not in later:
            gone = f"{name} is gone in the later snapshot: the server restarted between the two"
            raise InvalidInput(param, source, gone)
    for name, b, a in [*totals, *((name, b, later[name]) for name, b in before)]:
        if a < b:
            raise InvalidInput(
                param,
                source,
                f"{name} went down from {_shown(b)} to {_shown(a)}: the server restarted between the two "
                "snapshots",
            )


def series_difference(
    before: Sequence[tuple[str, N]], after: Sequence[tuple[str, N]]
) -> tuple[tuple[str, N], ...]:
    """``after - before`` series by series (a series new in ``after`` counts from 0)."""
    earlier = dict(before)
    return tuple((name, a - earlier.get(name, 0)) for name, a in after)


def _shown(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _models(samples: Iterable[Sample]) -> list[str]:
    return sorted({s.labels.get(MODEL_LABEL, "") for s in samples})


def _pick_model(samples: list[Sample], model_name: str | None, source: str) -> str | None:
    models = _models(samples)
    shown = ", ".join(repr(m) for m in models)
    if model_name is not None:
        if model_name not in models:
            raise InvalidInput("model_name", model_name, f"{source} has counters for model_name {shown}")
        return model_name
    if len(models) > 1:
        raise InvalidInput(
            "model_name", "not given", f"{source} has counters for several models ({shown}); choose one"
        )
    return models[0] or None


def _count(value: float, sample: Sample, source: str, param: str) -> int:
    if not (math.isfinite(value) and 0 <= value <= MAX_WHOLE and value == int(value)):
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
        raise InvalidInput(
            param,
            f"{sample.name}{{{labels}}} {value:g}",
            f"{source}: a counter must be a whole number in [0, 2^53]",
        )
    return int(value)


def _position(sample: Sample, source: str, param: str) -> int:
    text = sample.labels.get(POSITION_LABEL)
    if text is None or not text.isdigit():
        raise InvalidInput(
            param, f"{PER_POSITION} position={text!r}", f"{source}: positions must be labelled 0, 1, 2, ..."
        )
    return int(text)


def _per_position(samples: list[Sample], source: str, param: str) -> tuple[int, ...]:
    by_position: dict[int, int] = {}
    for s in samples:
        i = _position(s, source, param)
        by_position[i] = by_position.get(i, 0) + _count(s.value, s, source, param)
    k = max(by_position) + 1
    missing = [i for i in range(k) if i not in by_position]
    if missing:
        raise InvalidInput(
            param,
            f"{PER_POSITION} positions {sorted(by_position)}",
            f"{source}: positions {missing} are missing",
        )
    return tuple(by_position[i] for i in range(k))


def _series(found: list[Sample], source: str, param: str) -> tuple[tuple[str, int], ...]:
    """Each series once, with its count; one given twice is refused (summed, it would count twice)."""
    refuse_repeated(found, source=source, param=param)
    return tuple((series_name(s), _count(s.value, s, source, param)) for s in found)


def counters_from_text(
    text: str, *, source: str, model_name: str | None = None, param: str = "prometheus"
) -> SpecCounters:
    """The four counters of one model in an exposition, summed over engines (module docstring).
    Errors name ``source`` (the file) and the metric."""
    found = samples(text, COUNTERS, source=source, param=param)
    absent = [name for name in COUNTERS if not any(s.name == name for s in found)]
    if absent:
        raise InvalidInput(param, source, f"no vLLM speculative-decoding counter {', '.join(absent)}")
    model = _pick_model(found, model_name, source)
    mine = [s for s in found if s.labels.get(MODEL_LABEL, "") == (model or "")]
    series = _series(mine, source, param)
    totals = {name: 0 for name in COUNTERS[:3]}
    for s in mine:
        if s.name in totals:
            totals[s.name] += _count(s.value, s, source, param)
    return SpecCounters(
        drafts=totals[DRAFTS],
        draft_tokens=totals[DRAFT_TOKENS],
        accepted=totals[ACCEPTED],
        accepted_per_position=_per_position([s for s in mine if s.name == PER_POSITION], source, param),
        model_name=model,
        engines=tuple(sorted({s.labels[ENGINE_LABEL] for s in mine if ENGINE_LABEL in s.labels})),
        series=series,
    )


def read_counters(path: Path, *, model_name: str | None = None, param: str = "prometheus") -> SpecCounters:
    """:func:`counters_from_text` of a file."""
    return counters_from_text(read_text(path, param), source=str(path), model_name=model_name, param=param)


def interval(before: SpecCounters, after: SpecCounters, *, source: str) -> SpecCounters:
    """``after - before`` for every counter. A counter that went down, or a change in the number
    of draft positions, means the server restarted between the snapshots (``source``: the
    earlier file)."""
    pairs: list[tuple[str, int, int]] = [
        (DRAFTS, before.drafts, after.drafts),
        (DRAFT_TOKENS, before.draft_tokens, after.draft_tokens),
        (ACCEPTED, before.accepted, after.accepted),
    ]
    if len(before.accepted_per_position) != len(after.accepted_per_position):
        raise InvalidInput(
            "before",
            source,
            f"{PER_POSITION} has {len(before.accepted_per_position)} positions here and "
            f"{len(after.accepted_per_position)} later: the server restarted with another draft length",
        )
    for i, (b, a) in enumerate(zip(before.accepted_per_position, after.accepted_per_position, strict=True)):
        pairs.append((f'{PER_POSITION}{{position="{i}"}}', b, a))
    restarted(before.series, after.series, pairs, source=source, param="before")
    return SpecCounters(
        drafts=after.drafts - before.drafts,
        draft_tokens=after.draft_tokens - before.draft_tokens,
        accepted=after.accepted - before.accepted,
        accepted_per_position=tuple(
            a - b for b, a in zip(before.accepted_per_position, after.accepted_per_position, strict=True)
        ),
        model_name=after.model_name,
        engines=after.engines,
        series=series_difference(before.series, after.series),
    )


def metrics_from_prometheus(
    prometheus: Path,
    *,
    before: Path | None = None,
    model_name: str | None = None,
    costs: Costs | None = None,
) -> MetricsResult:
    """Per-position acceptance, E[N], the draft acceptance rate and (with costs) the implied
    speedup from a vLLM metrics file, or from the interval since the snapshot ``before``."""
    counters = read_counters(prometheus, model_name=model_name)
    if before is not None:
        earlier = read_counters(before, model_name=counters.model_name, param="before")
        counters = interval(earlier, counters, source=str(before))
    where = str(prometheus) if before is None else f"the interval from {before} to {prometheus}"
    if counters.drafts < 1:
        raise InvalidInput("prometheus", where, f"{DRAFTS} is 0: no speculative rounds to measure")
    try:
        result = calc.rates_from_counts(
            counters.drafts,
            counters.accepted_per_position,
            draft_tokens=counters.draft_tokens,
            costs=costs,
        )
    except InvalidInput as exc:
        if exc.option in _COUNT_PARAMS:
            raise InvalidInput("prometheus", where, f"the counters do not fit together: {exc}") from None
        raise
    return _with_source(result, counters, prometheus, before)


def _with_source(
    result: MetricsResult, counters: SpecCounters, prometheus: Path, before: Path | None
) -> MetricsResult:
    warnings: list[Notice] = []
    per_position = sum(counters.accepted_per_position)
    if per_position != counters.accepted:
        warnings.append(
            Notice(
                "prometheus_accepted_mismatch", {"accepted": counters.accepted, "per_position": per_position}
            )
        )
    source = MetricsSource(
        str(prometheus), None if before is None else str(before), counters.model_name, counters.engines
    )
    return replace(
        result, accepted_total=counters.accepted, source=source, warnings=(*result.warnings, *warnings)
    )


# ----------------------------------------------------------------------------- histogram view

ITERATION_TOKENS = "vllm:iteration_tokens_total"
#: the most steps a histogram's bucket may count (1e308 made the expected step 0 s)
MAX_STEPS = 1e15


@dataclass(frozen=True)
class Histogram:
    """Cumulative bucket counts of ``vllm:iteration_tokens_total`` (``le`` edges, +Inf last), and
    each bucket series as written with its count (what an interval compares one by one)."""

    edges: tuple[float, ...]
    cumulative: tuple[float, ...]
    series: tuple[tuple[str, float], ...] = ()


def histogram_from_text(text: str, *, source: str, param: str = "prometheus") -> Histogram:
    """The ``_bucket`` samples of :data:`ITERATION_TOKENS`, summed over labels other than ``le``."""
    found = samples(text, {ITERATION_TOKENS + "_bucket"}, source=source, param=param)
    buckets = [s for s in found if "le" in s.labels]
    refuse_repeated(buckets, source=source, param=param)
    if not buckets:
        raise InvalidInput(param, source, f"no {ITERATION_TOKENS} histogram buckets")
    models = {s.labels.get("model_name") for s in buckets}
    if len(models - {None}) > 1:  # (engines of one model sum; two models' steps are no one's)
        shown = ", ".join(sorted(m for m in models if m is not None))
        raise InvalidInput(
            param, source, f"holds {ITERATION_TOKENS} of several models ({shown}): give one model's snapshot"
        )
    by_edge: dict[float, float] = {}
    for s in buckets:
        try:
            edge = float(s.labels["le"])
        except ValueError:
            raise InvalidInput(
                param, source, f'not a Prometheus text exposition (le="{s.labels["le"]}")'
            ) from None
        by_edge[edge] = by_edge.get(edge, 0.0) + s.value
    edges = tuple(sorted(by_edge))
    cum = tuple(by_edge[e] for e in edges)
    for e, c in zip(edges, cum, strict=True):
        if not math.isfinite(c) or c < 0 or c > MAX_STEPS:
            raise InvalidInput(
                param,
                source,
                f'{ITERATION_TOKENS}_bucket{{le="{e:g}"}} is {c:g}: counts must be in [0, {MAX_STEPS:g}]',
            )
    for a, b, e in zip(cum, cum[1:], edges[1:], strict=False):
        if b < a:
            raise InvalidInput(
                param, source, f'bucket le="{e:g}" holds fewer steps than the one below: not cumulative'
            )
    return Histogram(edges, cum, tuple((series_name(s), s.value) for s in buckets))


def histogram_interval(before: Histogram, after: Histogram, *, source: str) -> Histogram:
    """``after - before``; a bucket (summed, or any one series of it) that went down or is gone
    means the server restarted (:func:`restarted`)."""
    if before.edges != after.edges:
        raise InvalidInput("prometheus", source, "the two snapshots have different bucket edges")
    sums = [
        (f'bucket le="{e:g}"', b, a)
        for e, b, a in zip(after.edges, before.cumulative, after.cumulative, strict=True)
    ]
    restarted(before.series, after.series, sums, source=source, param="prometheus")
    diff = tuple(a - b for _, b, a in sums)
    return Histogram(after.edges, diff, series_difference(before.series, after.series))
