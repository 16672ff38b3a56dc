"""How does each kind of work slow down when the machine drops to its slow level? (docs/benchmarks.md,
"Two speeds")

On a VM whose speed switches between two levels (the 2-core EPYC: about once a second), for
``--seconds``, op after op: the dispatch probe (ten hot (1×128)·(128×128) matmuls, the
``speed_probe`` dispatch call) run once and timed the second time, then the op run once and
timed the second time — both hot, so what the op before left in the caches does not decide the
level or the time. A call counts at the
fast level when its probe took at most ``FAST`` × the probes' 5th percentile, at the slow level
when it took at least ``SLOW`` × that. Prints, per op, its median time at each level and their
ratio; and the probe's share of calls at each level and how often the level changed (between
0.25 s windows, by the probe's median in each).

    python docs/notebook/scripts/bench_speed_levels.py [--seconds 40] [--threads 1] [--out FILE]
"""

from __future__ import annotations

import itertools
import json
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from bench_machine_drift import probe_ns, start

from infer_opt.profilers import model_profile, models

#: a probe within FAST × the probes' p5 is the fast level, at least SLOW × it the slow one
FAST, SLOW = 1.2, 1.5
#: the level changes are counted on the probe's medians over windows this long
WINDOW_S = 0.25


def _ops() -> dict[str, Callable[[], object]]:
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(1, 128, generator=g), torch.randn(128, 128, generator=g)
    a, b = torch.randn(256, 768, generator=g), torch.randn(768, 768, generator=g)
    q, kv = torch.randn(1, 12, 1, 64, generator=g), torch.randn(1, 12, 700, 64, generator=g)
    rows, values = torch.randn(64, 768, generator=g), torch.randn(4096, generator=g)
    big = torch.randn(16 * 2**20, generator=g)
    loaded = models.load_model("tiny", batch_size=1, seq_len=8)
    decode = model_profile.build_step(loaded, "decode", context=700, new_tokens=1, device="cpu").fn
    return {
        "matmul 1×128 · 128×128": lambda: x @ w,
        "matmul 256×768 · 768×768": lambda: a @ b,
        "decode attention 12 × 700": lambda: F.scaled_dot_product_attention(q, kv, kv),
        "layer norm 64 × 768": lambda: F.layer_norm(rows, (768,)),
        "add, 4,096 values": lambda: values + values,
        "sum over 64 MiB": big.sum,
        "tiny decode step 1 × 700": decode,
    }


def measure(seconds: float) -> dict[str, list[tuple[int, int, float]]]:
    """Per op, (probe ns, op ns, seconds since the start) for every call, round-robin over the
    ops for ``seconds``."""
    ops = _ops()
    x, w = torch.randn(1, 128), torch.randn(128, 128)
    with torch.no_grad():
        for fn in ops.values():
            for _ in range(20):
                fn()
        out: dict[str, list[tuple[int, int, float]]] = {name: [] for name in ops}
        begin = time.perf_counter()
        while time.perf_counter() < begin + seconds:
            for name, fn in ops.items():
                probe = probe_ns(x, w)
                fn()
                start = time.perf_counter_ns()
                fn()
                out[name].append((probe, time.perf_counter_ns() - start, time.perf_counter() - begin))
    return out


def summary(calls: dict[str, list[tuple[int, int, float]]], window: float = WINDOW_S) -> dict[str, object]:
    probes = sorted(p for pairs in calls.values() for p, _, _ in pairs)
    p5 = probes[len(probes) // 20]
    by_window: dict[int, list[int]] = {}
    for pairs in calls.values():
        for p, _, t in pairs:
            by_window.setdefault(int(t // window), []).append(p)
    medians = [statistics.median(by_window[k]) for k in sorted(by_window)]
    level = [m <= FAST * p5 for m in medians if m <= FAST * p5 or m >= SLOW * p5]
    per_op = {}
    for name, pairs in calls.items():
        fast = [t for p, t, _ in pairs if p <= FAST * p5]
        slow = [t for p, t, _ in pairs if p >= SLOW * p5]
        if fast and slow:
            per_op[name] = {
                "calls": len(pairs),
                "fast_us": statistics.median(fast) / 1e3,
                "slow_us": statistics.median(slow) / 1e3,
                "ratio": statistics.median(slow) / statistics.median(fast),
            }
    return {
        "probe_p5_us": p5 / 1e3,
        "probe_median_us": statistics.median(probes) / 1e3,
        "fast_share": sum(p <= FAST * p5 for p in probes) / len(probes),
        "slow_share": sum(p >= SLOW * p5 for p in probes) / len(probes),
        "windows": len(medians),
        "level_changes": sum(a != b for a, b in itertools.pairwise(level)),
        "ops": per_op,
    }


def main() -> None:
    args = start(__doc__, 40.0)
    result = summary(measure(args.seconds))
    print(
        f"probe (10 calls): p5 {result['probe_p5_us']:.1f} µs, median {result['probe_median_us']:.1f} µs; "
        f"fast level {100 * result['fast_share']:.0f}% of calls, slow {100 * result['slow_share']:.0f}%, "
        f"{result['level_changes']} changes between {result['windows']} windows of {WINDOW_S} s"
    )
    for name, row in result["ops"].items():
        print(
            f"{name:28s} fast {row['fast_us']:10.1f} µs  slow {row['slow_us']:10.1f} µs  "
            f"ratio {row['ratio']:.2f}  ({row['calls']} calls)"
        )
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
