from __future__ import annotations

import json
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.cost_models import capture_sizes as cs
from infer_opt.cost_models import speculative_tuning as spt
from infer_opt.cost_models.speculative import expected_tokens


def test_spec_check_numbers():
    # constant target t = 10 ms, draft 1 ms, verification = a target step (t(b(k+1)) = 10 ms), c_m = 1 ms:
    # S(3) = 10·2.952 / (3 + 10 + 1)
    target = cs.cost_curve([1], [0.010])
    draft = cs.cost_curve([1], [0.001])
    s = spt.speedup_table([0.8, 0.8, 0.8], target, draft, 0.001, np.array([1]), 3)
    assert s[0, 0] == 1.0
    assert s[0, 3] == pytest.approx(0.010 * 2.952 / 0.014)


def test_stops_paying_at_large_batch():
    target = cs.cost_curve([1, 64, 4096], [0.01, 0.012, 0.6])
    draft = cs.cost_curve([1, 4096], [0.002, 0.05])
    dist = cs.distribution([1, 16, 256, 2048], [1, 1, 1, 1])
    r = spt.tune([0.7, 0.6], target, draft, dist, overhead_s=0.0005)
    assert r.table[0].k > 0 and r.table[-1].k == 0 and r.table[-1].speedup == 1.0
    assert r.stop_above_batch is not None
    assert spt.VLLM_KEY in r.flags["vllm"]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=1, max_size=5),
    st.floats(0.001, 0.1),
    st.floats(0.0, 2.0),
    st.floats(0.0, 0.01),
    st.lists(st.integers(1, 500), min_size=1, max_size=5, unique=True),
)
def test_k_table_equals_brute_force(alphas, t1, slope, overhead, sizes):
    target = cs.cost_curve([1, 1000], [t1, t1 * 1000**slope])
    draft = cs.cost_curve([1], [t1 / 10])
    dist = cs.distribution(sorted(sizes), [1] * len(sizes))
    r = spt.tune(alphas, target, draft, dist, overhead_s=overhead)
    for row in r.table:
        b = row.batch_size
        best_k, best_s = 0, 1.0
        for k in range(1, len(alphas) + 1):
            s = (
                float(target([b])[0])
                * expected_tokens(alphas[:k])
                / (k * float(draft([b])[0]) + float(target([b * (k + 1)])[0]) + overhead)
            )
            if s > best_s:
                best_k, best_s = k, s
        assert row.speedup == pytest.approx(best_s)
        assert row.k == best_k or row.speedup == pytest.approx(1.0)


def test_vllm_table_ranges():
    # vLLM's num_speculative_tokens_per_batch_size: inclusive [start, end, k], the first from 1
    got = spt.vllm_table([1, 8, 16, 64, 256], [3, 3, 2, 0, 0])
    assert got == [[1, 8, 3], [9, 16, 2], [17, 256, 0]]
    assert spt.vllm_table([5], [2]) == [[1, 5, 2]]


def _lookup(table, b):
    """The k vLLM's dense lookup gives batch size b (a gap or the tail takes the range before)."""
    k = table[0][2]
    for start, _end, kk in table:
        if start <= b:
            k = kk
    return k


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 4096), st.integers(0, 8)), min_size=1, max_size=30, unique_by=lambda t: t[0]
    )
)
def test_vllm_table_is_valid_and_reproduces_k(rows):
    rows = sorted(rows)
    sizes, ks = [r[0] for r in rows], [r[1] for r in rows]
    table = spt.vllm_table(sizes, ks)
    # the rules vLLM's validate_and_normalize_dynamic_sd_schedule enforces
    assert table[0][0] == 1
    assert all(start <= end for start, end, _ in table)
    assert all(a[1] + 1 == b[0] for a, b in pairwise(table))  # contiguous, sorted
    assert all(k >= 0 for *_, k in table)
    assert all(a[2] != b[2] for a, b in pairwise(table))  # merged runs
    for b, k in zip(sizes, ks, strict=True):
        assert _lookup(table, b) == k


def test_flag_is_vllm_list_form():
    target = cs.cost_curve([1, 64, 4096], [0.01, 0.012, 0.6])
    draft = cs.cost_curve([1, 4096], [0.002, 0.05])
    dist = cs.distribution([1, 16, 256, 2048], [1, 1, 1, 1])
    r = spt.tune([0.7, 0.6], target, draft, dist, overhead_s=0.0005)
    config = json.loads(r.flags["vllm"].split("'")[1])
    table = config["num_speculative_tokens_per_batch_size"]
    assert table[0][0] == 1 and table[-1][1] == 2048 and table[-1][2] == 0
    assert config["num_speculative_tokens"] == max(row.k for row in r.table)


def test_the_expected_gain_is_the_ratio_of_total_times_not_the_mean_of_speedups():
    """Issue 42 (the chapter's exercise 33.13): 3x at batch 1 and 1x at batch 512 over equal
    steps is the time ratio Σ p·t / Σ p·t/S (~1.08x), not the mean ~2x: batch 512 dominates."""
    target = cs.cost_curve([1, 64, 4096], [0.010, 0.010, 0.6])  # flat, then compute-bound
    draft = cs.cost_curve([1, 4096], [0.0005, 0.03])
    dist = cs.distribution([1, 512], [1, 1])
    r = spt.tune([0.9, 0.9, 0.9], target, draft, dist)
    s = np.array([row.speedup for row in r.table])
    t = target(np.array([1, 512]))
    assert r.expected_gain == pytest.approx(float((0.5 * t).sum() / (0.5 * t / s).sum()))
    assert r.table[0].speedup > 1.5 and r.table[1].speedup == pytest.approx(1.0)
    assert r.expected_gain < 1.1 and float(s.mean()) > 1.9  # the mean would claim ~2x
    codes = [w.code for w in r.warnings]
    assert codes.count("speculative_cost_extrapolated") == 0  # 512·4 tokens within 4096


def test_a_cost_asked_beyond_its_measured_sizes_is_said():
    """Issue 42: a target cost measured up to 8 tokens was extrapolated to 2048 without a word."""
    target = cs.cost_curve([1, 8], [0.010, 0.011])
    draft = cs.cost_curve([1, 8], [0.001, 0.0011])
    r = spt.tune([0.8, 0.8], target, draft, cs.distribution([1, 512], [1, 1]))
    found = {w["curve"]: w for w in r.warnings if w.code == "speculative_cost_extrapolated"}
    assert found["target"]["high"] == 8 and found["target"]["asked"] == 512 * 3
    assert found["draft"]["share"] == pytest.approx(0.5)
