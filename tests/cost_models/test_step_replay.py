"""The predicted step replayed as a graph (cost_models/step_replay.py): worked examples and the
invariants max(Σh, Σk) ≤ step ≤ Σh + Σk, monotone in every cost, host + device path = step."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.cost_models.step_replay import replay


def _loop(h, k, sync=None):
    """The recurrence, one op at a time (what the vectorized replay must equal)."""
    t = end = 0.0
    for i, (hi, ki) in enumerate(zip(h, k, strict=True)):
        t += hi
        end = max(end, t) + ki
        if sync is not None and sync[i]:
            t = max(t, end)
    return max(t, end)


def test_host_bound_worked():
    # launches every 10 µs, kernels of 2 µs: the device waits for each launch
    r = replay([10e-6] * 4, [2e-6] * 4)
    # a = 10, 20, 30, 40; end = 12, 22, 32, 42
    assert r.step_s == pytest.approx(42e-6)  # Σh + the last k
    assert r.bound == "host"
    assert r.host_critical_s == pytest.approx(40e-6)
    assert r.device_critical_s == pytest.approx(2e-6)
    assert r.serial_s == pytest.approx(48e-6)
    assert r.idle_s == pytest.approx(34e-6)


def test_device_bound_worked():
    # launches every 1 µs, kernels of 10 µs: the host runs ahead, the queue fills
    r = replay([1e-6] * 4, [10e-6] * 4)
    # a_1 = 1; end = 11, 21, 31, 41
    assert r.step_s == pytest.approx(41e-6)  # a_1 + Σk
    assert r.bound == "device"
    assert (r.host_critical_s, r.device_critical_s) == pytest.approx((1e-6, 40e-6))


def test_mixed_and_no_kernel_ops():
    # h = 5, 1, 1, 20; k = 10, 0 (a view), 3, 4
    # a = 5, 6, 7, 27; end = 15, 15, 18, 31
    r = replay([5e-6, 1e-6, 1e-6, 20e-6], [10e-6, 0.0, 3e-6, 4e-6])
    assert r.step_s == pytest.approx(31e-6)
    assert (r.host_critical_s, r.device_critical_s) == pytest.approx((27e-6, 4e-6))
    assert r.bound == "host"


def test_sync_makes_the_host_wait():
    # h = 1, 1, 1 ; k = 10, 0, 2 ; a sync after op 1 (a host read): the host waits for end = 11
    # then a_2 = 11 + 1 = 12, end_2 = 14
    r = replay([1e-6, 1e-6, 1e-6], [10e-6, 0.0, 2e-6], sync=[False, True, False])
    assert r.step_s == pytest.approx(14e-6)
    # path: host 1 → kernel 10 (device) → sync → host 1 → kernel 2
    assert (r.host_critical_s, r.device_critical_s) == pytest.approx((2e-6, 12e-6))
    # without the sync the host runs ahead: 1 + 10 + 2
    assert replay([1e-6] * 3, [10e-6, 0.0, 2e-6]).step_s == pytest.approx(13e-6)


def test_empty_and_bad_input():
    assert replay([], []).step_s == 0.0
    with pytest.raises(ValueError, match="differ in length"):
        replay([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match=">= 0"):
        replay([-1.0], [1.0])
    with pytest.raises(ValueError, match="sync has"):
        replay([1.0], [1.0], sync=[True, False])


costs = st.lists(
    st.tuples(st.floats(0, 1e-3, allow_nan=False), st.floats(0, 1e-3, allow_nan=False), st.booleans()),
    min_size=1,
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(costs)
def test_bounds_and_loop(ops):
    h, k, sync = (list(x) for x in zip(*ops, strict=True))
    r = replay(h, k, sync)
    tol = 1e-12
    assert max(sum(h), sum(k)) <= r.step_s + tol
    assert r.step_s <= sum(h) + sum(k) + tol
    assert r.step_s == pytest.approx(_loop(h, k, sync), abs=tol)
    assert r.host_critical_s + r.device_critical_s == pytest.approx(r.step_s, abs=1e-10)
    assert r.host_critical_s >= -tol and r.device_critical_s >= -tol


@settings(max_examples=200, deadline=None)
@given(costs, st.integers(0, 39), st.floats(0, 1e-3, allow_nan=False), st.booleans())
def test_monotone_in_every_cost(ops, index, extra, on_host):
    h, k, sync = (np.array(x) for x in zip(*ops, strict=True))
    i = index % len(h)
    base = replay(h, k, sync).step_s
    h2, k2 = h.copy(), k.copy()
    (h2 if on_host else k2)[i] += extra
    assert replay(h2, k2, sync).step_s >= base - 1e-12
