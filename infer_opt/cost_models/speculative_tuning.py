"""The draft length per batch size
``S(k, b) = t(b)·E[N](k) / (k·t_d(b) + t(b·(k+1)) + c_m)``, ``E[N](k) = Σ_{i=0..k} Π_{j<i} α_j``
(:func:`speculative.expected_tokens`); k ∈ {0..K} maximising S, k = 0 → S = 1.

vLLM's dynamic speculative decoding (PR #32374) takes the table as
``speculative_config.num_speculative_tokens_per_batch_size``: a list of inclusive
``[range_start, range_end, k]`` entries, the first starting at 1, sorted, k >= 0 (clamped to
``num_speculative_tokens``); a batch size in a gap or above the last range takes the k of the
range before it. Read in vLLM's source (``vllm/config/speculative.py`` ``SpeculativeConfig`` and
``vllm/v1/spec_decode/dynamic/utils.py``, vllm main at commits 002e77c1 and 14b450ca); the release
it first shipped in is not checked here. Sizes between two observed batch sizes get the k of the
larger one (the table says nothing about them)"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from infer_opt.cost_models.capture_sizes import CostCurve, Distribution
from infer_opt.cost_models.speculative import expected_tokens, validate_alphas
from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.requests import TuneSpeculativeRequest
from infer_opt.results.tune_speculative import KRow, TuneSpeculativeResult

VLLM_KEY = "num_speculative_tokens_per_batch_size"
VLLM_KEY_SOURCE = (
    "vllm/config/speculative.py SpeculativeConfig.num_speculative_tokens_per_batch_size, "
    "list of inclusive [start, end, k] (vllm main @002e77c1, PR #32374); release not checked"
)


def speedup_table(
    alphas: Sequence[float],
    target: CostCurve,
    draft: CostCurve,
    overhead_s: float,
    batch_sizes: np.ndarray,
    k_max: int,
) -> np.ndarray:
    """``S[b, k]`` for k = 0..k_max (k beyond len(alphas) is not modelled: k_max is capped)."""
    a = validate_alphas(alphas)
    b = np.asarray(batch_sizes, dtype=np.float64)
    out = np.ones((b.size, k_max + 1))
    t = target(b)
    td = draft(b)
    for k in range(1, k_max + 1):
        en = expected_tokens(a[:k])
        out[:, k] = t * en / (k * td + target(b * (k + 1)) + overhead_s)
    return out


def best_k(s: np.ndarray) -> np.ndarray:
    """The argmax per row over k = 0..K (column 0 is S = 1); ties go to the smaller k, so k > 0
    only where it is strictly faster than no speculation."""
    return np.argmax(s, axis=1)


def vllm_table(sizes: Sequence[int], ks: Sequence[int]) -> list[list[int]]:
    """Inclusive ranges of consecutive sizes with the same k, as vLLM takes them:
    ``[[1, 16, 3], [17, 4096, 0]]`` (the first range starts at 1)."""
    out: list[list[int]] = []
    start = 1
    for i, (size, k) in enumerate(zip(sizes, ks, strict=True)):
        last = i == len(sizes) - 1
        if last or ks[i + 1] != k:
            out.append([start, int(size), int(k)])
            start = int(size) + 1
    return out


def _extrapolated(target: CostCurve, draft: CostCurve, dist: Distribution, k_top: int) -> list[Notice]:
    """A notice per cost curve asked beyond its measured sizes (the target verifies up to
    ``b·(k + 1)`` tokens; the draft runs at ``b``), with the share of steps that ask it."""
    out = []
    for name, curve, asked in (
        ("target", target, dist.sizes * (k_top + 1)),
        ("draft", draft, dist.sizes),
    ):
        beyond = curve.extrapolated(asked) | curve.extrapolated(dist.sizes)
        if beyond.any():
            values = {
                "count": int(beyond.sum()),
                "share": float(dist.probs[beyond].sum()),
                "low": int(curve.sizes[0]),
                "high": int(curve.sizes[-1]),
                "curve": name,
                "asked": int(max(asked.max(), dist.sizes.max())),
            }
            out.append(Notice("speculative_cost_extrapolated", values))
    return out


def tune(
    alphas: Sequence[float],
    target: CostCurve,
    draft: CostCurve,
    dist: Distribution,
    *,
    overhead_s: float = 0.0,
    k_max: int | None = None,
    inputs: dict[str, str] | None = None,
) -> TuneSpeculativeResult:
    a = validate_alphas(alphas)
    k_top = len(a) if k_max is None else k_max
    if k_top < 1:
        raise InvalidInput("k_max", k_top, "must be >= 1")
    notes: list[Notice] = []
    if k_top > len(a):
        notes.append(Notice("k_max_capped", {"k_max": k_top, "positions": len(a)}))
        k_top = len(a)
    s = speedup_table(a, target, draft, overhead_s, dist.sizes, k_top)
    ks = best_k(s)
    rows = tuple(
        KRow(
            int(b), int(k), float(s[i, k]), float(expected_tokens(a[:k])) if k else 1.0, float(dist.probs[i])
        )
        for i, (b, k) in enumerate(zip(dist.sizes, ks, strict=True))
    )
    stop = next((r.batch_size for i, r in enumerate(rows) if all(x.k == 0 for x in rows[i:])), None)
    # the time ratio over the distribution's steps: Σ p·t(b) / Σ p·t(b)/S(b) (the plain time of
    # the same tokens over the speculative time), never the mean of per-batch speed-ups
    plain = dist.probs * target(dist.sizes)
    chosen = np.array([r.speedup for r in rows])
    gain = float(plain.sum() / (plain / chosen).sum())
    notes += _extrapolated(target, draft, dist, k_top)
    table = vllm_table([int(x) for x in dist.sizes], [int(k) for k in ks])
    n_spec = max(1, int(max(ks)))
    config = {"num_speculative_tokens": n_spec, VLLM_KEY: table}
    flag = "--speculative-config '" + json.dumps(config) + "'  (add your method/model keys)"
    return TuneSpeculativeResult(
        table=rows,
        stop_above_batch=stop,
        expected_gain=gain,
        alphas=tuple(float(x) for x in a),
        k_max=k_top,
        overhead_s=overhead_s,
        speedups=tuple(tuple(float(x) for x in row) for row in s),
        flags={"vllm": flag},
        num_speculative_tokens=n_spec,
        vllm_key=VLLM_KEY,
        vllm_key_source=VLLM_KEY_SOURCE,
        inputs=inputs or {},
        warnings=tuple(notes),
    )


def _alphas(alphas: tuple[float, ...] | None, prometheus: list[Path] | None) -> tuple[tuple[float, ...], str]:
    if (alphas is None) == (not prometheus):
        raise InvalidInput(
            "--alphas",
            "missing" if alphas is None else "both",
            "give --alphas LIST or --prometheus AFTER --before BEFORE, one of them",
        )
    if alphas is not None:
        return tuple(alphas), "--alphas (as given)"
    if len(prometheus) != 2:
        raise InvalidInput("--before", "missing", "give two snapshots: --prometheus AFTER --before BEFORE")
    from infer_opt.inputs.tune import alphas_from_prometheus

    return alphas_from_prometheus(prometheus[0], prometheus[1])


def run(request: TuneSpeculativeRequest) -> TuneSpeculativeResult:
    """``infer-opt tune speculative``: the request's files read (:mod:`infer_opt.inputs.tune`)
    and :func:`tune` on them."""
    from infer_opt.cost_models import capture_sizes as cs
    from infer_opt.inputs.tune import read_costs, read_distribution, window

    r = request
    rates, rates_label = _alphas(r.alphas, window(r.prometheus, r.before))
    if (r.batches is None) == (r.batch_sizes is None):
        raise InvalidInput(
            "--batches",
            "missing" if r.batches is None else "both",
            "give --batches FILE or --batch-sizes LIST, one of them",
        )
    if r.batches is not None:
        dist, _ = read_distribution(r.batches)
    else:
        dist = cs.distribution(r.batch_sizes, [1.0] * len(r.batch_sizes), source="--batch-sizes")
    target, target_label, _ = read_costs(r.target_cost_file, "--target-cost-file")
    draft, draft_label, _ = read_costs(r.draft_cost_file, "--draft-cost-file")
    inputs = {
        "alphas": rates_label,
        "target_cost": target_label,
        "draft_cost": draft_label,
        "overhead": "--overhead (as given)",
        "distribution": dist.source,
    }
    return tune(rates, target, draft, dist, overhead_s=r.overhead, k_max=r.k_max, inputs=inputs)
