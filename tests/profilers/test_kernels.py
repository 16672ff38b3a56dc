"""The kernel registry, F/Q bookkeeping, reference checks, the sweep's failure handling, and
several runs (rotation, merging, resuming; drift planted with a fake clock), with tiny cases so
the file stays fast."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
import torch

from infer_opt.errors import InvalidInput, UnsupportedOnDevice
from infer_opt.inputs.measurements import kernel_points
from infer_opt.profilers import kernels as K
from infer_opt.results.kernels import KernelRow, KernelSuiteResult, SuiteSettings

FAST = SuiteSettings(warmup=1, reps=3)


def _case(name, build, *, family="toy", label="n=8", reference=None, compiles=False, inputs=None):
    def default_inputs(ctx):
        g = ctx.generator()
        return {"x": ctx.randn(8, generator=g), "y": ctx.randn(8, generator=g)}

    return K.KernelCase(
        name,
        family,
        label,
        8,
        cost=lambda s: (8.0, 24.0 * s / 4),
        inputs=inputs or default_inputs,
        build=build,
        reference=reference,
        compiles=compiles,
    )


ADD = _case("toy_add", lambda x: lambda: x["x"] + x["y"])


def test_quick_cpu_suite_has_every_family_and_compiled_cases_last():
    cases = K.all_cases("cpu", "quick")
    families = {c.family for c in cases}
    assert {"matmul", "elementwise", "launch", "softmax", "layer_norm", "attention", "bias_gelu"} <= families
    assert {"copy", "add", "scale", "tiny_add", "attention_explicit", "attention_sdpa"} <= {
        c.name for c in cases
    }
    first_compiling = next(i for i, c in enumerate(cases) if c.compiles)
    assert all(c.compiles for c in cases[first_compiling:])
    keys = [c.key for c in cases]
    assert len(keys) == len(set(keys))


def test_full_suite_is_a_superset_in_sizes():
    quick = {c.key for c in K.all_cases("cuda", "quick")}
    full = {c.key for c in K.all_cases("cuda", "full")}
    assert len(full) > len(quick)
    assert {k for k in quick if k.startswith("matmul")} <= full


def test_costs_follow_the_documented_formulas():
    cases = {c.key: c for c in K.all_cases("cpu", "quick")}
    assert cases["matmul[n=512]"].cost(4) == (2.0 * 512**3, 3.0 * 512 * 512 * 4)
    assert cases["copy[N=2^16]"].cost(2) == (0.0, 2.0 * 2**16 * 2)
    assert cases["add[N=2^16]"].cost(4) == (2.0**16, 3.0 * 2**16 * 4)
    assert cases["tiny_add[N=1]"].cost(4) == (1.0, 12.0)
    flops, nbytes = cases["attention_sdpa[1×8×256×64]"].cost(2)
    assert flops == 4.0 * 8 * 256 * 256 * 64 + 6.0 * 8 * 256 * 256
    assert nbytes == 4.0 * 8 * 256 * 64 * 2
    assert cases["attention_explicit[1×8×256×64]"].cost(2) == (flops, nbytes)


def test_select_by_name_family_and_commas():
    cases = K.all_cases("cpu", "quick")
    assert {c.name for c in K.select(cases, ["copy"])} == {"copy"}
    assert {c.name for c in K.select(cases, ["elementwise"])} == {"copy", "add", "scale"}
    assert {c.name for c in K.select(cases, ["matmul,tiny_add"])} == {"matmul", "tiny_add"}
    assert K.select(cases, None) == cases
    with pytest.raises(InvalidInput, match=r"only.*nope"):
        K.select(cases, ["matmul", "nope"])


def test_unknown_suite():
    with pytest.raises(InvalidInput, match="--suite"):
        K.all_cases("cpu", "medium")


def test_inputs_are_seeded_per_family_and_label_and_never_zero():
    explicit, blocked, sdpa = (
        c for c in K.all_cases("cpu", "quick") if c.family == "attention" and c.label == "1×8×256×64"
    )
    assert explicit.seed() == sdpa.seed() == blocked.seed()
    a = explicit.inputs(K.KernelContext("cpu", torch.float32, explicit.seed()))
    b = sdpa.inputs(K.KernelContext("cpu", torch.float32, sdpa.seed()))
    assert torch.equal(a["q"], b["q"]) and torch.equal(a["v"], b["v"])
    assert not torch.equal(a["q"], a["k"])
    assert a["q"].abs().sum() > 0


def test_registered_family_is_listed_and_removable():
    def provider(kind, suite):
        yield _case("extra", lambda x: lambda: x["x"] * 2)

    K.register_family(provider)
    try:
        assert any(c.name == "extra" for c in K.all_cases("cpu", "quick"))
    finally:
        K._FAMILIES.remove(provider)
    assert not any(c.name == "extra" for c in K.all_cases("cpu", "quick"))


def test_register_case_respects_kinds_and_suites():
    provider = K.register_case(_case("gpu_only", lambda x: lambda: x["x"]), kinds=("cuda",), suites=("full",))
    try:
        assert not any(c.name == "gpu_only" for c in K.all_cases("cpu", "full"))
        assert any(c.name == "gpu_only" for c in K.all_cases("cuda", "full"))
        assert not any(c.name == "gpu_only" for c in K.all_cases("cuda", "quick"))
    finally:
        K._FAMILIES.remove(provider)


def test_attention_case_helper_builds_a_checked_variant():
    shape = K.attention_shapes("cpu", "quick")[0]
    case = K.attention_case("attention_blocked", shape, K._sdpa)
    explicit = next(
        c for c in K.all_cases("cpu", "quick") if c.name == "attention_explicit" and c.label == case.label
    )
    row = K.run_case(
        case, torch.device("cpu"), torch.float32, FAST, {(case.family, case.label, explicit.name): explicit}
    )
    assert row.passed is True and row.error < 1e-5 and row.time_s > 0


def test_relative_error():
    ref = torch.tensor([3.0, 4.0])
    assert K.relative_error(ref, ref) == 0.0
    assert K.relative_error(torch.tensor([3.0, 4.5]), ref) == pytest.approx(0.1)
    assert K.relative_error(torch.zeros(3), ref) == float("inf")


def run(cases, **kwargs):
    return K.run_suite(cases, torch.device("cpu"), torch.float32, kwargs.pop("settings", FAST), **kwargs)


def test_rows_record_time_flops_bytes_and_achieved_rates():
    result = run([ADD])
    (row,) = result.rows
    assert row.time_s > 0 and row.summary.n == 3 and len(row.samples_s) == 3
    assert row.flops == 8.0 and row.bytes == 24.0
    assert row.achieved_flops_per_s == pytest.approx(8.0 / row.time_s)
    assert row.cold_s is not None and row.mode == "cpu-clock"
    assert result.complete and result.device == "cpu" and result.dtype == "float32"
    assert result.device_info["kind"] == "cpu"


def test_variant_matching_its_reference_is_timed():
    good = _case("toy_add_fast", lambda x: lambda: torch.add(x["x"], x["y"]), reference="toy_add")
    result = run([good], all_known=[ADD])
    (row,) = result.rows
    assert row.passed is True and row.error == 0.0 and row.tolerance == 1e-4
    assert row.time_s is not None


def test_variant_that_differs_is_reported_and_not_timed():
    bad = _case("toy_add_wrong", lambda x: lambda: x["x"] - x["y"], reference="toy_add")
    result = run([ADD, bad])
    row = result.rows[1]
    assert row.passed is False and row.error > 0.1
    assert row.time_s is None
    assert "differs from toy_add" in row.skipped_reason


def test_bf16_tolerance_is_looser():
    almost = _case("toy_add_bf16", lambda x: lambda: (x["x"] + x["y"]) * 1.01, reference="toy_add")
    result = K.run_suite([ADD, almost], torch.device("cpu"), torch.bfloat16, FAST)
    assert result.rows[1].tolerance == 2e-2
    assert result.rows[1].passed is True


def test_failures_and_oom_are_rows_and_the_sweep_goes_on():
    def oom(x):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    def broken(x):
        raise ValueError("no kernel for this shape")

    cases = [_case("oom", oom), _case("broken", broken), ADD]
    result = run(cases)
    assert [r.name for r in result.rows] == ["oom", "broken", "toy_add"]
    assert result.rows[0].skipped_reason.startswith("out of memory")
    assert result.rows[1].skipped_reason == "failed: ValueError: no kernel for this shape"
    assert result.rows[2].time_s > 0
    assert result.complete


def test_interrupt_keeps_finished_rows_and_saves_after_each_case():
    def interrupt(x):
        raise KeyboardInterrupt

    saved = []
    result = run([ADD, _case("stop", interrupt), ADD], on_row=saved.append)
    assert not result.complete
    assert [r.name for r in result.rows] == ["toy_add"]
    assert len(saved) == 1 and saved[0].rows[0].name == "toy_add"


def test_progress_reports_each_case():
    seen = []
    run([ADD, ADD], progress=lambda i, n, d: seen.append((i, n, d)))
    assert seen == [(0, 2, "toy_add[n=8]"), (1, 2, "toy_add[n=8]"), (2, 2, "done")]


def test_slow_compile_is_skipped_with_the_reason():
    def slow(x):
        time.sleep(1.0)
        return lambda: x["x"]

    settings = SuiteSettings(warmup=1, reps=3, compile_timeout_s=0.1)
    result = run([_case("slow_compile", slow, compiles=True)], settings=settings)
    assert "longer than 0.1 s; skipped" in result.rows[0].skipped_reason


def test_failing_compile_is_skipped_not_fatal():
    def fails(x):
        raise RuntimeError("InductorError: C++ compile error")

    result = run([_case("bad_compile", fails, compiles=True), ADD])
    assert result.rows[0].skipped_reason.startswith("torch.compile failed: RuntimeError")
    assert result.rows[1].time_s > 0


def test_cuda_graphs_on_cpu_are_refused():
    with pytest.raises(UnsupportedOnDevice, match="--cuda-graphs"):
        run([ADD], settings=SuiteSettings(cuda_graphs=True))


def test_points_and_json_round_trip():
    bad = _case("toy_add_wrong", lambda x: lambda: x["x"] - x["y"], reference="toy_add")
    result = run([ADD, bad])
    points = kernel_points(result)
    assert [p.name for p in points] == ["toy_add[n=8]"]
    again = KernelSuiteResult.from_dict(result.to_dict())
    assert again.rows[0].summary == result.rows[0].summary
    assert again.rows[0].samples_s == result.rows[0].samples_s
    assert again.settings == result.settings
    assert again.rows[1].passed is False


def test_real_quick_cases_run_on_the_cpu():
    cases = [c for c in K.all_cases("cpu", "quick") if c.key in {"matmul[n=64]", "softmax[1024×1024]"}]
    result = run(cases)
    assert all(r.time_s and r.time_s > 0 for r in result.rows)
    assert result.rows[0].achieved_flops_per_s > 1e6


@pytest.mark.gpu
def test_quick_subset_on_cuda_with_graphs_and_flush():
    dev = torch.device("cuda")
    cases = [
        c
        for c in K.all_cases("cuda", "quick")
        if c.name in ("matmul", "tiny_add", "attention_sdpa", "attention_explicit") and c.size <= 1024
    ]
    settings = SuiteSettings(warmup=3, reps=10, flush_cache=True, cuda_graphs=True)
    result = K.run_suite(cases, dev, torch.bfloat16, settings, all_known=K.all_cases("cuda", "quick"))
    timed = [r for r in result.rows if r.time_s is not None]
    assert timed, [r.skipped_reason for r in result.rows]
    assert all(r.mode == "cuda-graph" and r.eager_time_s for r in timed)
    assert all(r.passed is not False for r in result.rows)


def test_timed_callables_never_read_device_values_on_the_host():
    """A device->host read inside a timed call (``.item()``, ``bool(tensor)``) breaks CUDA
    graph capture (--cuda-graphs) and stalls the launch queue in eager CUDA timing: none of
    the built-in (non-compiling) cases may make one. Checked on the CPU with a dispatch mode
    that sees every aten call (such reads reach it as ``_local_scalar_dense``)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Reads(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.reads = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket is torch.ops.aten._local_scalar_dense:
                self.reads += 1
            return func(*args, **(kwargs or {}))

    smallest: dict[str, K.KernelCase] = {}
    for case in K.all_cases("cpu", "quick"):
        if not case.compiles and (case.name not in smallest or case.size < smallest[case.name].size):
            smallest[case.name] = case
    assert "attention_blocked" in smallest
    offenders = []
    for case in smallest.values():
        fn = case.build(case.inputs(K.KernelContext("cpu", torch.float32, case.seed())))
        with torch.no_grad(), Reads() as mode:
            fn()
        if mode.reads:
            offenders.append(case.key)
    assert offenders == []


# ---------------------------------------------------------------------------- GPU paths, checked on the CPU


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_blocked_attention_runs_its_matmuls_in_the_input_dtype(dtype):
    """The bf16 suite counts 2-byte elements and bf16 tensor-core work for attention_blocked:
    its two matmuls must run in bfloat16 (accumulating in float32 inside), not in float32."""
    from infer_opt.profilers.op_recorder import record_ops

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 300, 16, generator=g).to(dtype) for _ in range(3))
    calls = record_ops(lambda: K.blocked_attention_native(q, k, v, block_size=128))
    matmuls = [c for c in calls if c.name in ("aten::bmm", "aten::mm", "aten::matmul")]
    assert len(matmuls) == 2 * 3  # Q·Kᵀ and P·V per key block (300 keys: 3 blocks)
    assert {c.dtype for c in matmuls} == {str(dtype).removeprefix("torch.")}
    explicit = K._explicit_attention({"q": q, "k": k, "v": v})()
    out = K.blocked_attention_native(q, k, v, block_size=128)
    assert out.dtype == dtype
    assert K.relative_error(out, explicit) <= K.TOLERANCE[K.devices.dtype_name(dtype)]


def test_blocked_attention_case_passes_its_check_in_bfloat16():
    shape = (1, 2, 256, 32)
    blocked = K.attention_case("attention_blocked", shape, K._blocked)
    explicit = K.attention_case("attention_explicit", shape, K._explicit_attention, reference=None)
    lookup = {(explicit.family, explicit.label, explicit.name): explicit}
    row = K.run_case(blocked, torch.device("cpu"), torch.bfloat16, FAST, lookup)
    assert row.passed is True and row.time_s > 0
    assert row.bytes == K.attention_cost(shape, 2)[1]  # two bytes per element, as it runs


def _measure_kwargs(monkeypatch, settings, graph):
    seen = {}

    def fake_measure(fn, **kwargs):
        seen.update(kwargs)
        raise _Stop

    monkeypatch.setattr(K, "measure", fake_measure)
    with pytest.raises(_Stop):
        K._measure(lambda: None, torch.device("cuda", 0), settings, graph=graph)
    return seen


class _Stop(Exception):
    pass


def test_flushed_cuda_graphs_capture_one_call_per_replay(monkeypatch):
    flushed = _measure_kwargs(monkeypatch, SuiteSettings(flush_cache=True, cuda_graphs=True), graph=True)
    assert flushed["cuda_graph"] and flushed["flush_cache"] and flushed["calls_per_sample"] == 1
    warm = _measure_kwargs(monkeypatch, SuiteSettings(cuda_graphs=True), graph=True)
    assert warm["calls_per_sample"] == K.GRAPH_CALLS_PER_SAMPLE


def test_suite_result_says_how_it_was_timed():
    result = run([ADD])
    assert result.timing == "cpu-clock" and result.threads == torch.get_num_threads()
    assert result.matmul_precision == "ieee"
    cuda = KernelSuiteResult(
        "cuda:0", "GPU", "k", "float32", "quick", SuiteSettings(flush_cache=True, cuda_graphs=True)
    )
    assert cuda.timing == "cuda-graph-flushed" and cuda.threads is None
    assert (
        KernelSuiteResult("cuda:0", "GPU", "k", "bfloat16", "quick", SuiteSettings()).timing == "cuda-events"
    )


def test_a_capture_that_breaks_the_device_stops_the_sweep_with_rows_kept(monkeypatch):
    from infer_opt.profilers.timing import CaptureFailed

    def capture_fails(x):
        def fn():
            raise CaptureFailed(
                "CUDA graph capture failed: RuntimeError: illegal memory access", device_usable=False
            )

        return fn

    saved = []
    result = run([ADD, _case("graph", capture_fails), ADD], on_row=saved.append)
    assert not result.complete and [r.name for r in result.rows] == ["toy_add"]
    (stopped,) = result.warnings
    assert stopped.code == "sweep_stopped" and stopped["case"] == "graph[n=8]"
    assert "illegal memory access" in stopped["reason"]
    assert len(saved) == 1


def test_a_capture_that_fails_cleanly_skips_only_its_case():
    from infer_opt.profilers.timing import CaptureFailed

    def capture_fails(x):
        def fn():
            raise CaptureFailed("CUDA graph capture failed: RuntimeError: operation not permitted")

        return fn

    result = run([_case("graph", capture_fails), ADD])
    assert result.complete
    assert (
        result.rows[0].skipped_reason
        == "failed: CUDA graph capture failed: RuntimeError: operation not permitted"
    )
    assert result.rows[1].time_s > 0


def test_compile_threads_and_the_sweep_run_on_the_run_s_device(monkeypatch):
    """CUDA's current device is per thread: the compile worker must make the run's device
    current itself (simulated: activate records the thread it is entered on)."""
    import threading
    from contextlib import contextmanager

    entered = []

    @contextmanager
    def activate(dev):
        entered.append((str(dev), threading.current_thread().name))
        yield

    monkeypatch.setattr(K.devices, "activate", activate)
    result = run([_case("compiled", lambda x: lambda: x["x"] + 1, compiles=True)])
    assert result.rows[0].time_s > 0
    assert ("cpu", "MainThread") in entered  # the sweep
    assert ("cpu", "compile-compiled") in entered  # the compile worker


# ---------------------------------------------------------------------------- several runs


class FakeClock:
    """Nanoseconds that advance only when a planted kernel runs: each call costs its case's
    planted time times the drift of the current run."""

    def __init__(self) -> None:
        self.now = 0
        self.drift = 1.0

    def __call__(self) -> int:
        return self.now

    def kernel(self, cost_s: float):
        def run() -> None:
            self.now += round(cost_s * self.drift * 1e9)

        return run


def _planted(name: str, cost_s: float, clock: FakeClock) -> K.KernelCase:
    return K.KernelCase(
        name, "toy", "n=8", 8, cost=lambda s: (8.0, 32.0), inputs=lambda ctx: {},
        build=lambda x: clock.kernel(cost_s),
    )  # fmt: skip


@pytest.fixture
def clock(monkeypatch):
    """Every measurement in the suite reads the fake clock."""
    fake = FakeClock()
    real = K.measure
    monkeypatch.setattr(K, "measure", lambda fn, **kw: real(fn, clock=fake, **kw))
    return fake


def _suite(clock: FakeClock, costs: list[float], drifts: tuple[float, ...], **kwargs) -> KernelSuiteResult:
    """The planted cases timed in ``len(drifts)`` passes, pass k's calls ``drifts[k]`` slower."""
    cases = [_planted(f"k{i}", c, clock) for i, c in enumerate(costs)]
    done = [0]
    clock.drift = drifts[0]

    def on_row(result: KernelSuiteResult) -> None:
        done[0] += 1
        clock.drift = drifts[min(done[0] // len(cases), len(drifts) - 1)]

    settings = SuiteSettings(warmup=1, reps=5)
    from unittest import mock

    # the fake clock times the planted cases; the machine's real speed probe would not see its drift
    with mock.patch.object(K, "_speed_probe", lambda dev: 1e-3):
        return K.run_passes(
            cases, torch.device("cpu"), torch.float32, settings, runs=len(drifts), on_row=on_row, **kwargs
        )


def test_runs_keep_each_runs_median_and_pool_the_samples(clock):
    result = _suite(clock, [1e-3, 2e-3], (1.0, 1.3, 1.0))
    assert result.runs == 3 and result.complete
    first = result.rows[0]
    assert first.run_medians_s == pytest.approx((1e-3, 1.3e-3, 1e-3))
    assert first.runs == 3 and len(first.samples_s) == 15 and first.summary.n == 15
    assert first.time_s == pytest.approx(1e-3) and first.achieved_flops_per_s == pytest.approx(8.0 / 1e-3)
    again = KernelSuiteResult.from_dict(result.to_dict())
    assert again.rows[0].run_medians_s == first.run_medians_s and again.runs == 3


def test_a_run_slower_across_the_board_is_within_noise_a_larger_change_is_slower(clock):
    """The fake clock plants a drift: NEW's second run is 30% slower for every case, and one
    case is 2× slower in every run. Unchanged cases stay 'within noise', the changed one is
    'slower', and the headline sees no significant difference."""
    from infer_opt.cost_models import compare_runs
    from infer_opt.results.compare import NOISE

    base = _suite(clock, [1e-3] * 6, (1.0, 1.0, 1.0))
    new = _suite(clock, [1e-3] * 5 + [2e-3], (1.0, 1.3, 1.0))
    result = compare_runs.compare_results(base, new)
    verdicts = [r.verdict for r in result.rows]
    assert verdicts == [NOISE] * 5 + [compare_runs.SLOWER], verdicts
    assert result.rows[5].ratio == pytest.approx(2.0 * 1.3 ** (1 / 3))
    assert result.headline.verdict == NOISE and result.headline.floor is None


def test_a_planted_20_percent_slowdown_of_one_kernel_is_found(clock):
    from infer_opt.cost_models import compare_runs
    from infer_opt.results.compare import NOISE

    base = _suite(clock, [1e-3] * 6, (1.0, 1.0, 1.0))
    new = _suite(clock, [1e-3] * 5 + [1.2e-3], (1.0, 1.0, 1.0))
    rows = compare_runs.compare_results(base, new).rows
    assert [r.verdict for r in rows] == [NOISE] * 5 + [compare_runs.SLOWER]
    assert rows[5].ratio == pytest.approx(1.2)
    faster = compare_runs.compare_results(new, base).rows
    assert faster[5].verdict == compare_runs.FASTER


def test_each_pass_rotates_the_case_order_and_keeps_compiling_cases_last():
    cases = [_case(f"c{i}", lambda x: lambda: None) for i in range(6)]
    compiling = [_case(f"z{i}", lambda x: lambda: None, compiles=True) for i in range(2)]
    names = [[c.name for c in K.pass_order([*cases, *compiling], p, 3)] for p in range(3)]
    assert names[0] == ["c0", "c1", "c2", "c3", "c4", "c5", "z0", "z1"]
    assert names[1] == ["c2", "c3", "c4", "c5", "c0", "c1", "z0", "z1"]
    assert names[2] == ["c4", "c5", "c0", "c1", "c2", "c3", "z1", "z0"]


def test_passes_run_in_rotated_order(clock):
    seen = []
    cases = [_planted(f"k{i}", 1e-3, clock) for i in range(3)]
    settings = SuiteSettings(warmup=0, reps=1)
    K.run_passes(cases, torch.device("cpu"), torch.float32, settings, runs=3,
                 progress=lambda i, n, text: seen.append(text))  # fmt: skip
    firsts = [text for text in seen if text.endswith("[n=8]")][::3]
    assert firsts == ["run 1/3: k0[n=8]", "run 2/3: k1[n=8]", "run 3/3: k2[n=8]"]


def test_merge_row_pools_runs_and_a_failed_check_in_any_pass_fails_the_row():
    summary = K.Summary.from_samples([1.0, 1.0])
    first = KernelRow("a", "toy", "n=8", 8, "float32", 8.0, 32.0, time_s=1.0, summary=summary,
                        samples_s=(1.0, 1.0), passed=True, error=0.0)  # fmt: skip
    second = replace(first, time_s=3.0, summary=K.Summary.from_samples([3.0, 3.0]), samples_s=(3.0, 3.0))
    merged = K.merge_row(first, second)
    assert merged.run_medians_s == (1.0, 3.0) and merged.samples_s == (1.0, 1.0, 3.0, 3.0)
    assert merged.time_s == 2.0 and merged.achieved_bytes_per_s == 16.0 and merged.runs == 2
    failed = replace(second, time_s=None, summary=None, samples_s=(), passed=False, error=0.5)
    kept = K.merge_row(merged, failed)
    assert kept.runs == 2 and kept.passed is False and kept.error == 0.5
    assert K.merge_row(None, first) is first


def test_resume_times_only_the_missing_runs(clock, monkeypatch):
    """Interrupted in the second of three passes, then resumed: every case ends with three
    runs in run order, and no (case, pass) is timed twice."""
    real = K.run_case
    timed: list[str] = []

    def counting(case, *args, **kwargs):
        if len(timed) == 5 and stop:
            raise KeyboardInterrupt
        timed.append(case.name)
        return real(case, *args, **kwargs)

    monkeypatch.setattr(K, "run_case", counting)
    stop = True
    partial = _suite(clock, [1e-3, 2e-3, 3e-3, 4e-3], (1.0, 1.1, 1.2))
    assert not partial.complete and sorted(r.runs for r in partial.rows) == [1, 1, 1, 2]
    stop = False
    resumed = _suite(clock, [1e-3, 2e-3, 3e-3, 4e-3], (1.0, 1.1, 1.2), previous=partial)
    assert resumed.complete and len(timed) == 12 and [r.runs for r in resumed.rows] == [3, 3, 3, 3]
    for before, after in zip(partial.rows, resumed.rows, strict=True):
        assert (after.run_medians_s or (after.time_s,))[: before.runs] == (
            before.run_medians_s or (before.time_s,)
        )


def test_resume_refuses_another_setup(clock):
    done = _suite(clock, [1e-3], (1.0,))
    with pytest.raises(InvalidInput) as err:
        _suite(clock, [1e-3], (1.0,), previous=replace(done, suite="full"))
    assert err.value.option == "resume" and "suite (full vs quick)" in str(err.value)
    other = replace(done, settings=SuiteSettings(warmup=5, reps=20))
    with pytest.raises(InvalidInput, match=r"warmup \(5 vs 1\), reps \(20 vs 5\)"):
        _suite(clock, [1e-3], (1.0,), previous=other)
