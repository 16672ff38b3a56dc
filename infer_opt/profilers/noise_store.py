"""Run-to-run noise floors cached like the roofline fits: one
:class:`~infer_opt.store.CalibrationStore` per compared kind
(``noise-kernels``, ``noise-profile``), one file per
:class:`~infer_opt.run_key.RunKey` (device model, CPU threads, dtype, float32
matmul precision, timing) at ``cache_dir()/noise-<kind>/<key>.json``, validated
(:func:`~infer_opt.cost_models.run_stats.noise_floor_problems`) before it is saved and before it
is used, a corrupt file reported and moved aside. ``infer-opt ab`` saves one after an A/A (the
same command on both sides); ``compare`` and ``ab`` read it as the default noise.

Imports nothing heavy: ``compare`` reads the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from infer_opt.cost_models.run_stats import Noise, NoiseFloor, noise_floor_problems
from infer_opt.notices import Notice
from infer_opt.store import CalibrationStore, Stored
from infer_opt.run_key import RunKey


def _check(record: NoiseFloor, key: RunKey | None, timings: Sequence[str] | None) -> tuple[Notice, ...]:
    return noise_floor_problems(record, key, timings)


STORES: dict[str, CalibrationStore[NoiseFloor]] = {
    kind: CalibrationStore(f"noise-{kind}", NoiseFloor, _check) for kind in ("kernels", "profile")
}


def save_floor(record: NoiseFloor) -> Stored:
    """Cache ``record`` under its key if it passes its check (:meth:`CalibrationStore.save`)."""
    return STORES[record.compared].save(record)


def noise_for(results: Iterable[Any]) -> Noise:
    """The noise to compare ``results`` with: the cached floors of their run keys (the larger
    σ per family when the keys differ, e.g. two thread counts), else the default; anything the
    lookups found wrong (a corrupt or unusable file) travels in :attr:`Noise.notices`."""
    sigmas: dict[str, float] = {}
    where: list[str] = []
    notices: list[Notice] = []
    seen: set[tuple[str, RunKey]] = set()
    for result in results:
        lookup_key = (result.KIND, RunKey.of(result))
        if lookup_key in seen or result.KIND not in STORES:
            continue
        seen.add(lookup_key)
        found = STORES[result.KIND].load(lookup_key[1])
        notices.extend(found.notices)
        if found.result is not None:
            where.append(str(found.path))
            for group in found.result.groups:
                sigmas[group.key] = max(sigmas.get(group.key, 0.0), group.between_run_cv)
    if not where:
        return Noise(notices=tuple(notices))
    return Noise("measured", sigmas, where=", ".join(where), notices=tuple(notices))
