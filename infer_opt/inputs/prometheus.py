"""Speculative-decoding counters from vLLM's Prometheus metrics (the text its ``/metrics`` serves).

vLLM (v1 engine) exports four counters, labelled ``model_name`` and ``engine``:

* ``vllm:spec_decode_num_drafts_total`` — draft rounds D,
* ``vllm:spec_decode_num_draft_tokens_total`` — draft tokens proposed,
* ``vllm:spec_decode_num_accepted_tokens_total`` — draft tokens accepted A,
* ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}`` — rounds in which the
  draft at 0-based position i was accepted, a_i.

They are summed over engines (and any other label) for one model — the only one in the file,
or the one named by ``model_name``. With an earlier snapshot the interval between the two is
used (differences), series by series: a counter of any one engine that went down (hidden in
the sum when another engine's went up), or an engine that is gone, means the server restarted
in between. A series given twice in one file (the same name and labels, e.g. two scrapes
concatenated) is refused: summed, it would count its drafts twice.
Then, as ``from-metrics`` (:func:`speculative.rates_from_counts`): conditional
``α_1 = a_0/D``, ``α_{i+1} = a_i/a_{i-1}``, unconditional ``a_i/D``, ``E[N] = 1 + Σ a_i/D``
(= ``1 + A/D``: vLLM adds to both from the same count; a disagreement, e.g. a scrape taken
between the updates, is reported) and the draft acceptance rate ``Σ a_i / draft tokens``.

The exposition (text format 0.0.4, what ``curl <server>/metrics`` gets) is parsed by
``prometheus_client``'s own parser, imported only here. The ``_created`` samples (gauges of the
counters' creation times), HELP and TYPE lines and every other metric are ignored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from infer_opt.cost_models import speculative as calc
from infer_opt.errors import InvalidInput
from infer_opt.files import read_text
from infer_opt.notices import Notice

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


def parse_samples(text: str, *, source: str, param: str) -> list[Sample]:
    """The samples of :data:`COUNTERS` in a Prometheus text exposition, through
    ``prometheus_client``'s parser."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = set(COUNTERS)
    try:
        return [
            Sample(s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name in wanted
        ]
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise InvalidInput(param, source, f"not a Prometheus text exposition ({detail})") from None


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
    if not (math.isfinite(value) and value >= 0 and value == int(value)):
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
        raise InvalidInput(
            param, f"{sample.name}{{{labels}}} {value:g}", f"{source}: a counter must be a whole number >= 0"
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


def _series_name(sample: Sample) -> str:
    labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
    return f"{sample.name}{{{labels}}}"


def _series(samples: list[Sample], source: str, param: str) -> tuple[tuple[str, int], ...]:
    """Each series once, with its count; one given twice is refused (summed, it would count twice)."""
    seen: dict[str, int] = {}
    for s in samples:
        name = _series_name(s)
        if name in seen:
            raise InvalidInput(
                param,
                name,
                f"{source}: this series appears more than once (two scrapes in one file?); "
                "give one snapshot per file",
            )
        seen[name] = _count(s.value, s, source, param)
    return tuple(seen.items())


def counters_from_text(
    text: str, *, source: str, model_name: str | None = None, param: str = "prometheus"
) -> SpecCounters:
    """The four counters of one model in an exposition, summed over engines (module docstring).
    Errors name ``source`` (the file) and the metric."""
    samples = parse_samples(text, source=source, param=param)
    absent = [name for name in COUNTERS if not any(s.name == name for s in samples)]
    if absent:
        raise InvalidInput(param, source, f"no vLLM speculative-decoding counter {', '.join(absent)}")
    model = _pick_model(samples, model_name, source)
    mine = [s for s in samples if s.labels.get(MODEL_LABEL, "") == (model or "")]
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
    later = dict(after.series)
    for name, b in before.series:
        if name not in later:
            gone = f"{name} is gone in the later snapshot: the server restarted between the two"
            raise InvalidInput("before", source, gone)
        pairs.append((name, b, later[name]))
    for name, b, a in pairs:
        if a < b:
            raise InvalidInput(
                "before",
                source,
                f"{name} went down from {b} to {a}: the server restarted between the two snapshots",
            )
    return SpecCounters(
        drafts=after.drafts - before.drafts,
        draft_tokens=after.draft_tokens - before.draft_tokens,
        accepted=after.accepted - before.accepted,
        accepted_per_position=tuple(
            a - b for b, a in zip(before.accepted_per_position, after.accepted_per_position, strict=True)
        ),
        model_name=after.model_name,
        engines=after.engines,
        series=tuple((name, a - dict(before.series).get(name, 0)) for name, a in after.series),
    )


def metrics_from_prometheus(
    prometheus: Path,
    *,
    before: Path | None = None,
    model_name: str | None = None,
    costs: calc.Costs | None = None,
) -> calc.MetricsResult:
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
    result: calc.MetricsResult, counters: SpecCounters, prometheus: Path, before: Path | None
) -> calc.MetricsResult:
    warnings: list[Notice] = []
    per_position = sum(counters.accepted_per_position)
    if per_position != counters.accepted:
        warnings.append(
            Notice(
                "prometheus_accepted_mismatch", {"accepted": counters.accepted, "per_position": per_position}
            )
        )
    source = calc.MetricsSource(
        str(prometheus), None if before is None else str(before), counters.model_name, counters.engines
    )
    return replace(
        result, accepted_total=counters.accepted, source=source, warnings=(*result.warnings, *warnings)
    )
