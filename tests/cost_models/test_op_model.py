"""The calibrated operator model: interpolation, fallbacks, cache states, step sums, accuracy
statistics and the ridge crossing (SPEC §5.1)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.cost_models import op_model
from infer_opt.errors import InvalidInput
from infer_opt.messages import text
from infer_opt.results.calibration import (
    CalibrationResult,
    DeviceRoofline,
    FamilyCalibration,
    GridPoint,
    HostCalibration,
)

T0, R, B = 2e-6, 1e10, 5e9


def base(flops: float, nbytes: float) -> float:
    return T0 + max(flops / R, nbytes / B)


def family(name: str, points: list[tuple[tuple[float, ...], float, float, float]], state: str = "warm", **kw):
    """A family with the known base roofline (T0, R, B) and the given (features, flops, bytes,
    time) points."""
    names = tuple(f"x{i}" for i in range(len(points[0][0])))
    grid = tuple(GridPoint(f, t, 0.01, fl, q) for f, fl, q, t in points)
    return FamilyCalibration(name, state, names, grid, T0, R, B, kw.get("cv", 0.05))


def calibration(*families: FamilyCalibration, host: HostCalibration | None = None) -> CalibrationResult:
    return CalibrationResult(
        device="cpu",
        device_name="test cpu",
        device_key="cpu-test-1t-float32",
        dtype="float32",
        threads=1,
        warm_reuse_bytes=4000,
        cold_reuse_bytes=1_000_000,
        families=families,
        host=host,
        roofline=DeviceRoofline(R, B, T0),
        complete=True,
    )


def line_family(ratios: dict[float, float]) -> FamilyCalibration:
    """1-D family over elements n (bytes = 8n): time = base × ratio at each grid n."""
    return family("add.t", [((n,), 0.0, 8.0 * n, base(0.0, 8.0 * n) * r) for n, r in ratios.items()])


# ---------------------------------------------------------------------------- interpolation


def test_prediction_is_exact_at_every_measured_point():
    fam = line_family({64: 1.5, 256: 0.8, 1024: 1.2, 4096: 1.1})
    interp = op_model.FamilyInterpolator(fam)
    for p in fam.points:
        t, extrapolated = interp.time(p.features, p.flops, p.bytes)
        assert t == pytest.approx(p.time_s, rel=1e-12)
        assert not extrapolated
        assert interp.on_grid(p.features)


def test_residual_is_interpolated_linearly_in_log_features():
    # ratio 1 at n = 64 and ratio e at n = 256: halfway in log2 (n = 128) the residual is 1/2
    fam = line_family({64: 1.0, 256: math.e})
    t, extrapolated = op_model.FamilyInterpolator(fam).time((128,), 0.0, 8.0 * 128)
    assert t == pytest.approx(base(0.0, 1024.0) * math.exp(0.5))
    assert not extrapolated
    assert not op_model.FamilyInterpolator(fam).on_grid((128,))


def test_outside_the_grid_the_nearest_residuals_fade_into_the_family_roofline():
    # four shapes at residual 0.3 and one noisy outlier (residual 3) at the edge of the grid
    ratios = {
        64: math.exp(0.3),
        128: math.exp(0.3),
        256: math.exp(0.3),
        512: math.exp(0.3),
        1024: math.exp(3.0),
    }
    interp = op_model.FamilyInterpolator(line_family(ratios))
    # one octave beyond the grid: the median of the 4 nearest (0.3), shrunk by 1 - 1/3
    t, extrapolated = interp.time((2048,), 0.0, 8.0 * 2048)
    assert extrapolated
    assert t == pytest.approx(base(0.0, 8.0 * 2048) * math.exp(0.3 * (1 - 1 / op_model.EXTRAPOLATION_REACH)))
    # far beyond it (more than EXTRAPOLATION_REACH octaves): the family's own roofline
    far, _ = interp.time((2**20,), 0.0, 8.0 * 2**20)
    assert far == pytest.approx(base(0.0, 8.0 * 2**20))


def test_a_constant_feature_on_the_grid_makes_other_values_extrapolated():
    points = [((m, 64.0), 2 * m * 64 * 64.0, 4 * 64 * 64.0, 1e-5 * m) for m in (1.0, 4.0, 16.0)]
    interp = op_model.FamilyInterpolator(family("mm.nt", points))
    assert not interp.time((2.0, 64.0), 2 * 2 * 64 * 64.0, 4 * 64 * 64.0)[1]
    assert interp.time((2.0, 128.0), 2 * 2 * 64 * 128.0, 4 * 64 * 128.0)[1]


def test_two_dimensional_grid_interpolates_inside_its_hull():
    points = []
    for m in (1.0, 4.0, 16.0):
        for n in (64.0, 256.0):
            flops, nbytes = 2 * m * n * 64, 4 * n * 64
            points.append(((m, n), flops, nbytes, base(flops, nbytes) * 1.3))
    interp = op_model.FamilyInterpolator(family("mm.nt", points))
    t, extrapolated = interp.time((2.0, 128.0), 2 * 2 * 128 * 64.0, 4 * 128 * 64.0)
    assert not extrapolated
    assert t == pytest.approx(base(2 * 2 * 128 * 64.0, 4 * 128 * 64.0) * 1.3)


@given(st.lists(st.floats(0.25, 4.0), min_size=2, max_size=6), st.floats(0.0, 1.0))
def test_interpolated_residual_stays_within_the_grid_residuals(ratios, where):
    fam = line_family({float(4 ** (i + 3)): r for i, r in enumerate(ratios)})
    n = 4 ** (3 + where * (len(ratios) - 1))
    rho, extrapolated = op_model.FamilyInterpolator(fam).residual_at((n,))
    assert not extrapolated
    assert min(math.log(r) for r in ratios) - 1e-9 <= rho <= max(math.log(r) for r in ratios) + 1e-9


def test_a_family_without_features_predicts_its_median():
    fam = FamilyCalibration(
        "view.view", "warm", (), (GridPoint((), 1e-6, 0.0, 0.0, 0.0),), 1e-6, math.inf, math.inf
    )
    t, extrapolated = op_model.FamilyInterpolator(fam).time((), 0.0, 0.0)
    assert t == pytest.approx(1e-6)
    assert not extrapolated


# ---------------------------------------------------------------------------- the model


def test_unknown_family_falls_back_then_to_the_device_roofline():
    model = op_model.OpModel(calibration(line_family({64: 1.0, 4096: 1.0})))
    borrowed = model.estimate(op_model.OpQuery("aten::sub", "sub.t", (256.0,), 256.0, 2048.0))
    assert (
        borrowed.source == op_model.SOURCE_FALLBACK
        and borrowed.used == "add.t@warm"
        and borrowed.extrapolated
    )
    roof = model.estimate(op_model.OpQuery("aten::foo", "other.foo", (), 1e6, 1e3))
    assert roof.source == op_model.SOURCE_ROOFLINE and roof.time_s == pytest.approx(T0 + 1e6 / R)
    assert roof.bound == "compute"


def test_a_family_keyed_by_more_features_than_the_call_is_not_its_shapes():
    """A calibration saved when ``conv2d`` was keyed by (N, C_in, C_out, H, W, kh, kw) predicts a
    call keyed by its implicit GEMM (M, N, K, groups) from the device roofline, not by reading
    seven features from four (an IndexError before)."""
    old = family(
        "conv2d", [((n, 3.0, 768.0, 224.0, 224.0, 16.0, 16.0), 1e9, 1e7, 2e-4) for n in (4.0, 128.0)]
    )
    q = op_model.OpQuery("aten::conv2d", "conv2d", (784.0, 768.0, 768.0, 1.0), 1e9, 1e7)
    estimate = op_model.OpModel(calibration(old)).estimate(q)
    assert estimate.source == op_model.SOURCE_ROOFLINE
    assert estimate.time_s == pytest.approx(base(1e9, 1e7))


def three_states() -> list[FamilyCalibration]:
    """mm.nt at M = 1, 4 in three states: 1, 2, 8 µs (hot, warm, cold) at M = 1; the cold grid
    stops at M = 4, the others reach M = 64."""

    def fam(state, times, ms):
        return family("mm.nt", [((m,), 2.0 * m, 8.0, t) for m, t in zip(ms, times, strict=True)], state=state)

    return [
        fam("hot", [1e-6, 1e-6, 3e-6], [1.0, 4.0, 64.0]),
        fam("warm", [2e-6, 2e-6, 4e-6], [1.0, 4.0, 64.0]),
        fam("cold", [8e-6, 8e-6], [1.0, 4.0]),
    ]


def query(m: float, reuse: float | None, main: float = 1000.0) -> op_model.OpQuery:
    return op_model.OpQuery("aten::mm", "mm.nt", (m,), 2.0 * m, 8.0, reuse, main)


def test_the_reuse_distance_places_an_op_between_the_calibrated_states():
    model = op_model.OpModel(calibration(*three_states()))
    # anchors for 1000 main bytes: hot at the L2 (half the warm read: 2000 > 1000), warm 1000 + 4000
    # = 5000, cold 1000 + 10^6
    assert model.estimate(query(1.0, 1000.0)).time_s == pytest.approx(1e-6)
    # a footprint that still fits in the L2 leaves the operand there: hot
    assert model.estimate(query(1.0, 2000.0)).time_s == pytest.approx(1e-6)
    between = math.sqrt(2000.0 * 5000.0)
    assert model.estimate(query(1.0, between)).time_s == pytest.approx(math.sqrt(1e-6 * 2e-6))
    assert model.estimate(query(1.0, 5000.0)).time_s == pytest.approx(2e-6)
    assert model.estimate(query(1.0, 1_001_000.0)).time_s == pytest.approx(8e-6)
    # halfway between the warm and cold anchors in log distance: the geometric mean
    middle = math.sqrt(5000.0 * 1_001_000.0)
    estimate = model.estimate(query(1.0, middle))
    assert estimate.time_s == pytest.approx(math.sqrt(2e-6 * 8e-6))
    assert estimate.state in ("warm", "cold") and estimate.source == op_model.SOURCE_GRID
    # clamped beyond the ends; no main operand = hot
    assert model.estimate(query(1.0, 1e12)).time_s == pytest.approx(8e-6)
    assert model.estimate(query(1.0, None)).time_s == pytest.approx(1e-6)


def test_beyond_the_cold_grid_only_the_grids_that_reach_the_shape_count():
    model = op_model.OpModel(calibration(*three_states()))
    # M = 16 is outside the cold grid (M <= 4): a compute-bound shape, placed between hot and warm
    far = model.estimate(query(16.0, 1e12))
    assert not far.extrapolated and far.state == "warm"
    # with only a warm grid, every distance gets it
    only_warm = op_model.OpModel(calibration(three_states()[1]))
    assert only_warm.estimate(query(1.0, 1e12)).time_s == pytest.approx(2e-6)


def test_fallbacks_are_related_families_best_first():
    assert op_model.fallbacks("mul.b.nc") == ["mul.b", "add.b"]
    assert op_model.fallbacks("gemm.nt") == []
    assert op_model.fallbacks("baddbmm.nn") == ["bmm.nn"]
    assert op_model.fallbacks("gelu.s") == ["mul.s"]
    assert op_model.fallbacks("sdpa.causal") == []
    assert op_model.fallbacks("sdpa.decode.gqa") == ["sdpa.decode"]
    assert op_model.fallbacks("sdpa.causal.tail") == ["sdpa.causal"]
    assert op_model.fallbacks("sdpa.full.tail") == ["sdpa.full"]
    # a mixed-dtype op borrows the same op in one dtype first, then as the plain one would
    assert op_model.fallbacks("add.t.mixed") == ["add.t"]
    assert op_model.fallbacks("mul.b.nc.mixed") == ["mul.b.nc", "mul.b", "add.b"]


def test_grouped_query_decode_borrows_plain_decode_on_its_first_three_features():
    """A calibration without the grouped-query family predicts ``(B·H, Tk, d, g)`` from the plain
    decode grid at ``(B·H, Tk, d)``, flagged as borrowed; with the family, from its own grid."""
    plain = family(
        "sdpa.decode",
        [((bh, tk, 64.0), 1e6, 1e6, 3 * base(1e6, 1e6)) for bh in (4.0, 16.0) for tk in (64.0, 1024.0)],
        state="hot",
    )
    q = op_model.OpQuery("aten::sdpa", "sdpa.decode.gqa", (8.0, 256.0, 64.0, 4.0), 1e6, 1e6)
    borrowed = op_model.OpModel(calibration(plain)).estimate(q)
    assert borrowed.source == op_model.SOURCE_FALLBACK and borrowed.extrapolated
    assert borrowed.time_s == pytest.approx(3 * base(1e6, 1e6))
    own = family(
        "sdpa.decode.gqa",
        [
            ((bh, tk, 64.0, g), 1e6, 1e6, 2 * base(1e6, 1e6))
            for bh in (4.0, 16.0)
            for tk in (64.0, 1024.0)
            for g in (2.0, 8.0)
        ],
        state="hot",
    )
    estimate = op_model.OpModel(calibration(plain, own)).estimate(q)
    assert estimate.source == op_model.SOURCE_GRID and not estimate.extrapolated
    assert estimate.time_s == pytest.approx(2 * base(1e6, 1e6))


def test_step_is_the_sum_of_its_ops_plus_the_host_term():
    host = HostCalibration(per_op_s=1e-6, per_module_call_s=3e-6)
    model = op_model.OpModel(calibration(line_family({64: 1.0, 4096: 1.0}), host=host))
    queries = [op_model.OpQuery("aten::add", "add.t", (n,), 0.0, 8.0 * n) for n in (64.0, 256.0, 1024.0)]
    step = op_model.predict_step(model, queries, n_module_calls=5)
    assert step.op_time_s == pytest.approx(sum(base(0.0, 8.0 * n) for n in (64, 256, 1024)))
    assert step.host_s == pytest.approx(3 * 1e-6 + 5 * 3e-6)
    assert step.step_time_s == pytest.approx(step.op_time_s + step.host_s)
    low, high = step.band_s
    assert low < step.step_time_s < high


def test_the_host_term_slows_down_with_each_calls_context_as_the_small_ops_do():
    """h = c_op·Σφ_i + c_mod·n_mod·mean φ, φ_i = Φ^{w_i}: Φ = 4 (context over hot), w the
    context weight (0 in the L2, 1 at the context read and beyond)."""
    host = HostCalibration(per_op_s=1e-6, per_module_call_s=3e-6)
    model = _context_model(host)
    assert model.dispatch_slowdown() == pytest.approx(4.0)
    assert model.context_weight(None) == model.context_weight(2.0**20) == 0.0
    assert model.context_weight(2.0**22.5) == pytest.approx(0.5, rel=1e-3)
    assert model.context_weight(2.0**30) == 1.0
    query = op_model.OpQuery("aten::add", "add.t", (256.0,), 0.0, 2048.0)
    near, mid, far = (replace(query, context_bytes=b) for b in (0.0, 2.0**22.5, 2.0**25))
    phis = [1.0, 2.0, 4.0]
    step = op_model.predict_step(model, [near, mid, far], n_module_calls=4)
    assert step.host_s == pytest.approx(1e-6 * sum(phis) + 3e-6 * 4 * sum(phis) / 3, rel=1e-3)
    # the op itself: 4x at the context read and beyond
    assert model.estimate(far).time_s == pytest.approx(4 * model.estimate(near).time_s)
    # without context states (a GPU, an older calibration) the host term is the hot loop's
    plain = op_model.OpModel(calibration(replace(line_family({64: 1.0, 4096: 1.0}), state="hot"), host=host))
    assert op_model.predict_step(plain, [near, mid], 4).host_s == pytest.approx(2e-6 + 12e-6)


def test_an_op_with_a_main_operand_adds_its_code_context_to_where_its_data_is():
    """An embedding of few rows: its data state comes from the reuse distance (hot/cold), and
    the context state's cost over the hot one is added at its context weight."""
    fams = tuple(
        family("embedding", [((4.0, 64.0), 0.0, 1024.0, t), ((8.0, 64.0), 0.0, 2048.0, t)], state)
        for state, t in (("hot", 2e-6), ("cold", 5e-6), ("context", 12e-6))
    )
    calib = replace(
        calibration(*fams), warm_reuse_bytes=2**22, cold_reuse_bytes=2**29, context_reuse_bytes=2**24
    )
    model = op_model.OpModel(calib)
    query = op_model.OpQuery("aten::embedding", "embedding", (4.0, 64.0), 0.0, 1024.0, 2.0**40, 1024.0)
    cold_code_warm = model.estimate(replace(query, context_bytes=0.0))
    assert cold_code_warm.time_s == pytest.approx(5e-6) and cold_code_warm.state == "cold"
    cold_code_cold = model.estimate(replace(query, context_bytes=2.0**30))
    assert cold_code_cold.time_s == pytest.approx(5e-6 + (12e-6 - 2e-6))


def test_fit_family_recovers_a_known_base_roofline_and_rejects_bad_points():
    points = [
        GridPoint((float(n),), base(2.0 * n, 8.0 * n), 0.0, 2.0 * n, 8.0 * n)
        for n in (2**k for k in range(4, 20))
    ]
    fam = op_model.fit_family("add.t", "warm", ("elements",), points)
    assert fam.launch_s == pytest.approx(T0, rel=0.05)
    assert fam.bandwidth_bytes_per_s == pytest.approx(B, rel=0.05)
    assert fam.cv_rel_error is not None and fam.cv_rel_error < 0.05
    with pytest.raises(InvalidInput, match="finite and > 0"):
        op_model.fit_family("add.t", "warm", ("elements",), [GridPoint((1.0,), 0.0, 0.0, 1.0, 1.0)])
    with pytest.raises(InvalidInput, match="state"):
        op_model.fit_family("add.t", "lukewarm", ("elements",), points)


def test_calibration_result_round_trips_through_json():
    result = calibration(line_family({64: 1.0, 256: 2.0}), host=HostCalibration(1e-6, 2e-6))
    assert CalibrationResult.from_dict(result.to_dict()) == result


# ---------------------------------------------------------------------------- cache states


def test_weights_read_once_per_step_are_a_step_away():
    # each call reads its own 400-byte weight (main operand) and a 10-byte activation
    calls = [
        op_model.Touches(reads=((i, 400), (100 + i, 10)), writes=((200 + i, 10),), main=(0,))
        for i in range(4)
    ]
    # the other three calls' storages, then the weight itself
    assert op_model.reuse_distances(calls) == [(3 * (400 + 10 + 10) + 400, 400.0)] * 4


def test_a_storage_touched_many_times_in_between_takes_its_room_once():
    """Reuse distance is a footprint: an activation read by ten calls between two uses of a
    weight counts its bytes once, not ten times."""
    weight = op_model.Touches(reads=((1, 400), (2, 100)), writes=((2, 100),), main=(0,))
    rereads = [op_model.Touches(reads=((2, 100),), writes=((3, 50),)) for _ in range(10)]
    assert op_model.reuse_distances([weight, *rereads])[0] == (100 + 50 + 400, 400.0)


def test_context_distances_count_each_storage_once_since_the_same_op():
    weight = op_model.Touches(reads=((1, 400), (2, 100)), writes=((2, 100),), main=(0,))
    rereads = [op_model.Touches(reads=((2, 100),), writes=((3, 50),)) for _ in range(10)]
    names = ["mm", *["add"] * 10]
    context = op_model.context_distances(names, [weight, *rereads])
    assert context[0] == 100 + 50  # since the previous mm (a step ago): storages 2 and 3, once each
    assert context[2] == 0.0  # the add just before touched only what this add touches
    assert context[1] == 400 + 100  # since the last add (a step ago): the mm's weight and output


def _context_model(host: HostCalibration | None = None) -> op_model.OpModel:
    """add.t measured hot and (4× slower) in context; anchors at 2 MiB (hot) and 16 MiB."""
    hot = replace(line_family({64: 1.0, 4096: 1.0}), state="hot")
    slow = replace(hot, state="context", points=tuple(replace(p, time_s=4 * p.time_s) for p in hot.points))
    calib = replace(calibration(hot, slow, host=host), warm_reuse_bytes=2**22, context_reuse_bytes=2**24)
    return op_model.OpModel(calib)


def test_an_op_without_a_main_operand_sits_between_hot_and_context_by_its_context_distance():
    model = _context_model()
    query = op_model.OpQuery("aten::add", "add.t", (256.0,), 0.0, 2048.0)
    t_hot = model.estimate(query).time_s
    assert model.estimate(replace(query, context_bytes=0.0)).time_s == pytest.approx(t_hot)
    assert model.estimate(replace(query, context_bytes=2**21)).time_s == pytest.approx(t_hot)  # in the L2
    far = model.estimate(replace(query, context_bytes=2**30))
    assert far.time_s == pytest.approx(4 * t_hot) and far.state == "context"  # clamped
    # halfway in log distance between the anchors (2 MiB and 16 MiB + 1 byte): 2x
    assert model.estimate(replace(query, context_bytes=2**22.5)).time_s == pytest.approx(2 * t_hot, rel=1e-3)
    # an older calibration without the context state: hot at any distance
    hot_only = calibration(replace(line_family({64: 1.0, 4096: 1.0}), state="hot"))
    assert op_model.OpModel(hot_only).estimate(replace(query, context_bytes=2**30)).time_s == pytest.approx(
        t_hot
    )


def test_an_ops_own_code_is_cold_from_the_l1_on_shared_code_from_the_l2():
    """With ``context_near_bytes`` (the L1 caches) a small op that runs a kernel of its own slows
    down from there on; a view (metadata only) and the host's share of a call (the dispatcher, the
    Python around it: code every op runs) keep the L2 as their hot anchor — as every op did in a
    calibration without the field."""
    base_model = _context_model(host=HostCalibration(1e-6, 0.0))
    model = op_model.OpModel(replace(base_model.calibration, context_near_bytes=2**16))
    add = op_model.OpQuery("aten::add", "add.t", (256.0,), 0.0, 2048.0)
    view = op_model.OpQuery("aten::view", "view.view", (), 0.0, 0.0)
    views = replace(line_family({64: 1.0, 4096: 1.0}), family="view.view", feature_names=())
    t_hot = model.estimate(replace(add, context_bytes=0.0)).time_s
    assert model.estimate(replace(add, context_bytes=2**16)).time_s == pytest.approx(t_hot)
    # 2 MiB: 5/8 of the way from 64 KiB to 16 MiB in log bytes (was: still hot)
    at_l2 = model.estimate(replace(add, context_bytes=2**21)).time_s
    assert at_l2 == pytest.approx(t_hot * 4 ** (5 / 8), rel=1e-3)
    assert base_model.estimate(replace(add, context_bytes=2**21)).time_s == pytest.approx(t_hot)
    assert model.estimate(replace(add, context_bytes=2**30)).time_s == pytest.approx(4 * t_hot)
    assert model.near_bytes("add.t") == 2**16 and model.near_bytes("view.view") == 2**21
    assert model.near_bytes(None) == 2**21 and base_model.near_bytes("add.t") == 2**21
    assert model.context_weight(2**21, "view.view") == 0.0 == model.context_weight(2**21)
    # the host term places each call's share from the L2, whatever the op
    queries = [replace(add, context_bytes=2**21), replace(view, context_bytes=2**21)]
    assert op_model.predict_step(model, queries, 0).host_s == pytest.approx(2e-6)
    hot_view = op_model.OpModel(replace(calibration(views), context_near_bytes=2**16, warm_reuse_bytes=2**22))
    assert hot_view.anchor_bytes("hot", replace(view, context_bytes=1.0)) == 2**21


def test_beyond_the_context_read_a_small_op_slows_on_to_its_far_state():
    """The far state (after a flush of the last-level cache) is a third anchor of the dispatch
    context: between the context read and the far read ``log t̂`` is linear in log distance,
    clamped beyond; a calibration without far states stays at the context state."""
    model = _context_model()
    hot = model.calibration.families[0]
    far_family = replace(hot, state="far", points=tuple(replace(p, time_s=16 * p.time_s) for p in hot.points))
    calib = replace(model.calibration, families=(*model.calibration.families, far_family))
    with_far = op_model.OpModel(replace(calib, far_reuse_bytes=2**26))
    query = op_model.OpQuery("aten::add", "add.t", (256.0,), 0.0, 2048.0)
    t_hot = with_far.estimate(replace(query, context_bytes=0.0)).time_s
    at_context = with_far.estimate(replace(query, context_bytes=2**24 + 1)).time_s
    assert at_context == pytest.approx(4 * t_hot, rel=1e-6)
    # halfway from 16 MiB to 64 MiB in log bytes: 8x, the geometric mean of 4x and 16x
    halfway = with_far.estimate(replace(query, context_bytes=2**25 + 1))
    assert halfway.time_s == pytest.approx(8 * t_hot, rel=1e-3)
    beyond = with_far.estimate(replace(query, context_bytes=2**32))
    assert beyond.time_s == pytest.approx(16 * t_hot) and beyond.state == "far"
    # without the far states (an older calibration): clamped at the context state
    assert model.estimate(replace(query, context_bytes=2**32)).time_s == pytest.approx(4 * t_hot)


def test_a_far_state_out_of_reach_of_the_shape_is_not_used():
    """The far grid covers only the smallest calls; a larger one interpolates hot and context."""
    model = _context_model()
    hot = model.calibration.families[0]
    small = tuple(replace(p, time_s=16 * p.time_s) for p in hot.points if p.features[0] <= 64)
    far_family = replace(hot, state="far", points=small)
    calib = replace(model.calibration, families=(*model.calibration.families, far_family))
    with_far = op_model.OpModel(replace(calib, far_reuse_bytes=2**26))
    query = op_model.OpQuery("aten::add", "add.t", (1024.0,), 0.0, 8192.0, context_bytes=2**32)
    assert with_far.estimate(query).time_s == pytest.approx(model.estimate(query).time_s)
    assert with_far.estimate(query).state == "context"


def test_an_op_with_a_main_operand_ignores_a_far_state():
    """Where an embedding's table is decides its data state; its code's cost is the context
    state's, added at its context weight — a far family of the same name changes nothing."""
    fams = tuple(
        family("embedding", [((4.0, 64.0), 0.0, 1024.0, t), ((8.0, 64.0), 0.0, 2048.0, t)], state)
        for state, t in (("hot", 2e-6), ("cold", 5e-6), ("context", 12e-6), ("far", 40e-6))
    )
    calib = replace(
        calibration(*fams),
        warm_reuse_bytes=2**22,
        cold_reuse_bytes=2**29,
        context_reuse_bytes=2**24,
        far_reuse_bytes=2**26,
    )
    without = replace(calib, families=fams[:3])
    for reuse in (2.0**22, 2.0**27, 2.0**40):  # the table in the L2, past the far read, in memory
        query = op_model.OpQuery(
            "aten::embedding", "embedding", (4.0, 64.0), 0.0, 1024.0, reuse, 1024.0, 2.0**30
        )
        assert (
            op_model.OpModel(calib).estimate(query).time_s == op_model.OpModel(without).estimate(query).time_s
        )
    assert op_model.OpModel(calib).estimate(query).time_s == pytest.approx(5e-6 + (12e-6 - 2e-6))


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 1000)), min_size=1, max_size=30))
def test_a_reuse_distance_is_at_most_the_bytes_of_all_storages_plus_the_operand(reads):
    calls = [op_model.Touches(reads=((storage, n),), main=(0,)) for storage, n in reads]
    largest: dict[int, int] = {}
    for storage, n in reads:
        largest[storage] = max(n, largest.get(storage, 0))
    for (distance, main), (_, n) in zip(op_model.reuse_distances(calls), reads, strict=True):
        # each storage counted once, at most at its largest size, then the operand itself
        assert main == n and n <= distance <= sum(largest.values()) + n


def test_a_kv_cache_counts_from_its_last_full_read_not_the_new_row():
    weights = op_model.Touches(reads=((1, 5000),), writes=((2, 10),), main=(0,))
    write_row = op_model.Touches(reads=((3, 10),), writes=((9, 10),))
    read_cache = op_model.Touches(reads=((4, 10), (9, 100)), writes=((5, 10),), main=(1,))
    distances = op_model.reuse_distances([weights, write_row, read_cache])
    # from the last full read of the cache (a step ago) to this one: the storages the calls touched
    # in between (the weights, their output, the row and its source), then the cache itself
    assert distances[2] == (5000 + 10 + 10 + 10 + 100, 100.0)
    assert distances[1] == (None, 0.0)  # no main operand


# ---------------------------------------------------------------------------- accuracy


def test_error_stats_reports_absolute_errors_that_signed_ones_would_hide():
    stats = op_model.error_stats([110.0, 90.0], [100.0, 100.0])
    assert stats.mape == pytest.approx(0.1)
    assert stats.mean_signed_rel_error == pytest.approx(0.0)
    assert stats.p90_abs_rel_error == pytest.approx(0.1)
    assert stats.max_abs_rel_error == pytest.approx(0.1)
    assert op_model.error_stats([], []).mape is None


def test_error_stats_p90_worked_example():
    measured = [1.0] * 10
    predicted = [1.0 + 0.01 * k for k in range(10)]  # errors 0, 1%, ..., 9%
    stats = op_model.error_stats(predicted, measured)
    assert stats.mape == pytest.approx(0.045)
    assert stats.p90_abs_rel_error == pytest.approx(0.081)


def test_error_stats_rejects_non_positive_measurements():
    with pytest.raises(InvalidInput, match="measured"):
        op_model.error_stats([1.0], [0.0])
    with pytest.raises(InvalidInput, match="as many"):
        op_model.error_stats([1.0, 2.0], [1.0])


# ---------------------------------------------------------------------------- sweeps


def test_ridge_crossing_interpolates_in_log_space():
    # intensity = B/2: reaches the ridge 1.5 at B = 3, between the sweep points 2 and 4
    assert op_model.ridge_crossing([1, 2, 4, 8], [0.5, 1.0, 2.0, 4.0], 1.5) == pytest.approx(3.0)


def test_ridge_crossing_edges():
    assert op_model.ridge_crossing([1, 2], [2.0, 4.0], 1.5) == 1.0
    assert op_model.ridge_crossing([1, 2], [0.5, 1.0], 1.5) is None
    with pytest.raises(InvalidInput, match="ridge"):
        op_model.ridge_crossing([1], [1.0], 0.0)


@given(st.floats(0.1, 100.0), st.floats(1.5, 50.0))
def test_ridge_crossing_of_a_linear_intensity_is_exact(slope, ridge):
    xs = [2**k for k in range(12)]
    crossing = op_model.ridge_crossing(xs, [slope * x for x in xs], ridge)
    expected = ridge / slope
    if expected <= xs[0]:
        assert crossing == xs[0]
    elif expected > xs[-1]:
        assert crossing is None
    else:
        assert crossing == pytest.approx(expected, rel=1e-9)


# ---------------------------------------------------------------------------- the calibration's own noise


def states(name: str, times: dict[str, list[float]], spread: float = 0.01) -> list[FamilyCalibration]:
    """``name`` in each state of ``times``, at M = 1, 2, 4, … (one time per shape)."""
    return [
        FamilyCalibration(
            name,
            state,
            ("M",),
            tuple(GridPoint((2.0**i,), t, spread, 1.0, 1.0) for i, t in enumerate(ts)),
            T0,
            R,
            B,
        )
        for state, ts in times.items()
    ]


def test_state_order_counts_the_shapes_where_a_colder_state_came_out_faster():
    """Neighbouring states only (hot → warm → cold, hot → context → far), at shared shapes: a
    colder state 5% faster is within the tolerance, 20% faster is counted; with no warm state
    the hot one is cold's neighbour."""
    orders = op_model.state_order(
        [
            *states("mm", {"hot": [1.0, 1.0, 1.0], "warm": [0.8, 0.95, 2.0], "cold": [3.0, 0.7]}),
            *states("add", {"hot": [1.0, 1.0], "context": [2.0, 0.5], "far": [1.0, 9.0, 9.0]}),
            *states("emb", {"hot": [1.0, 1.0], "cold": [0.5, 2.0]}),
            *states("view", {"hot": [1.0]}),
        ]
    )
    got = {(o.family, o.hotter, o.colder): (o.faster, o.shapes) for o in orders}
    assert got == {
        ("add", "context", "far"): (1, 2),
        ("add", "hot", "context"): (1, 2),
        ("emb", "hot", "cold"): (1, 2),
        ("mm", "hot", "warm"): (1, 3),
        ("mm", "warm", "cold"): (1, 2),
    }
    result = calibration(*states("mm", {"hot": [1.0, 1.0, 1.0], "warm": [0.8, 0.95, 2.0]}))
    assert result.out_of_order_share == pytest.approx(1 / 3)
    # hot only (a GPU's matmuls), or nothing: no pair to compare
    assert calibration(*states("mm", {"hot": [1.0]})).out_of_order_share is None
    assert calibration().out_of_order_share is None and calibration().point_spread is None


def test_state_order_leaves_out_times_that_are_not_finite_and_positive():
    fams = states("mm", {"hot": [1.0, math.nan, 1.0], "warm": [0.5, 0.5, -1.0]})
    assert [(o.faster, o.shapes) for o in op_model.state_order(fams)] == [(1, 1)]


@given(
    st.lists(st.floats(1e-6, 1e-2), min_size=1, max_size=12),
    st.floats(1.0, 10.0),
    st.floats(0.0, 0.5),
)
def test_a_colder_state_no_faster_is_never_counted_and_one_much_faster_always_is(hot, slower, tolerance):
    colder = [t * slower for t in hot]
    fams = states("mm", {"hot": hot, "warm": colder})
    assert op_model.state_order(fams, tolerance)[0].faster == 0
    much_faster = [t * (1 - tolerance) / 1.01 for t in hot]
    fams = states("mm", {"hot": hot, "warm": much_faster})
    assert op_model.state_order(fams, tolerance)[0].faster == len(hot)


def test_a_noisy_calibration_says_so_and_a_quiet_one_says_nothing():
    quiet = calibration(*states("mm", {"hot": [1.0, 1.0, 1.0], "warm": [1.5, 1.5, 0.95]}, spread=0.05))
    assert quiet.point_spread == pytest.approx(0.05)
    assert op_model.noise_notices(quiet) == []
    # repetitions that spread (median IQR/median above 10%), or states out of order (1 of 3)
    spread = calibration(*states("mm", {"hot": [1.0], "warm": [1.5]}, spread=0.2))
    out_of_order = calibration(*states("mm", {"hot": [1.0, 1.0, 1.0], "warm": [1.5, 1.5, 0.5]}))
    # each notice names the figures over their thresholds only
    for noisy, values in ((spread, (0.2, None)), (out_of_order, (None, 1 / 3))):
        (notice,) = op_model.noise_notices(noisy)
        assert notice.code == "calibration_noisy"
        assert (notice["spread"], notice["out_of_order"]) == pytest.approx(values)
    both = calibration(*states("mm", {"hot": [1.0, 1.0, 1.0], "warm": [1.5, 1.5, 0.5]}, spread=0.2))
    assert (
        op_model.noise_notices(both)[0]["spread"],
        op_model.noise_notices(both)[0]["out_of_order"],
    ) == pytest.approx((0.2, 1 / 3))
    words = text(op_model.noise_notices(spread)[0])
    assert "spread by 20%" in words and "faster" not in words
