from __future__ import annotations

import contextlib
import json
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from infer_opt.profilers import flops as fl
from infer_opt.profilers import models, op_recorder

pytestmark = pytest.mark.usefixtures("one_thread")


def _only(calls, name):
    found = [c for c in calls if c.name == name]
    assert found, (name, [c.name for c in calls])
    return found


def test_linear_is_recorded_as_addmm_with_torch_flops_and_bytes():
    layer = nn.Linear(64, 32)
    x = torch.randn(16, 64)
    (call,) = _only(op_recorder.record_ops(lambda: layer(x), layer), "aten::addmm")
    assert call.flops == 2 * 16 * 64 * 32 and call.flops_source == "torch"
    # bias 32, x 16×64, weightᵀ 64×32 read once; out 16×32 written once (float32)
    assert call.bytes == 4 * (32 + 16 * 64 + 64 * 32 + 16 * 32)
    assert call.category == "matmul" and call.module == "" and call.module_type == "Linear"
    assert call.shapes == ((32,), (16, 64), (64, 32))


def test_cpu_sdpa_kernel_counts_our_attention_flops_including_gqa():
    q = torch.randn(2, 8, 16, 32)
    k = torch.randn(2, 2, 24, 32)
    v = torch.randn(2, 2, 24, 32)
    calls = op_recorder.record_ops(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
    (call,) = [c for c in calls if c.category == "attention"]
    assert call.name == "aten::_scaled_dot_product_flash_attention_for_cpu"
    assert call.flops == 4 * 2 * 8 * 16 * 24 * 32 and call.flops_source == "infer-opt"


def test_sdpa_flops_formula_matches_torchs_where_torch_has_one():
    from torch.utils.flop_counter import sdpa_flop_count

    shapes = ((2, 4, 16, 32), (2, 4, 24, 32), (2, 4, 24, 32))
    assert fl.sdpa_flops(*shapes) == sdpa_flop_count(*shapes)


def test_views_move_no_bytes_and_are_memory_ops():
    x = torch.randn(4, 8, 16)

    def views():
        return x.view(32, 16).t().unsqueeze(0).expand(3, 16, 32).transpose(1, 2)[:, 1:].select(0, 1)

    calls = op_recorder.record_ops(views)
    assert {c.name for c in calls} >= {
        "aten::view",
        "aten::t",
        "aten::unsqueeze",
        "aten::expand",
        "aten::slice",
    }
    assert all(c.bytes == 0 and c.flops == 0 and c.category == "memory" for c in calls)


def test_broadcast_input_is_read_once():
    x, bias = torch.randn(64, 128), torch.randn(128)
    (call,) = _only(op_recorder.record_ops(lambda: x + bias.expand(64, 128)), "aten::add")
    assert call.bytes == 4 * (64 * 128 + 128 + 64 * 128)
    assert call.flops == 64 * 128 and call.flops_source == "nominal"


def test_copy_into_a_cache_slice_reads_the_source_and_writes_the_slice_only():
    cache = torch.zeros(1, 2, 100, 8)
    new = torch.randn(1, 2, 3, 8)

    def write():
        cache[:, :, 10:13] = new

    (call,) = _only(op_recorder.record_ops(write), "aten::copy_")
    assert call.bytes == 2 * 4 * new.numel()


def test_module_paths_and_norm_refinement():
    model = models.build_builtin("llama-tiny")
    ids = models.random_tokens(1, 8, model.config.vocab_size)
    calls = op_recorder.record_ops(lambda: model(ids), model)
    q_proj = [c for c in calls if c.module == "blocks.1.attn.q_proj"]
    assert [c.name for c in q_proj if c.category == "matmul"] == ["aten::mm"]
    norm_ops = [c for c in calls if c.module == "blocks.0.attn_norm"]
    assert norm_ops and all(c.category == "normalization" for c in norm_ops if c.bytes)
    assert {c.category for c in calls if c.module == "blocks.0.attn"} >= {"attention", "memory"}


def test_categorize_by_name():
    assert op_recorder.categorize("aten::mm") == "matmul"
    assert op_recorder.categorize("aten::_scaled_dot_product_efficient_attention") == "attention"
    assert op_recorder.categorize("aten::native_layer_norm") == "normalization"
    assert op_recorder.categorize("aten::bmm", module_type="GPT2Attention") == "attention"
    assert op_recorder.categorize("aten::_softmax") == "elementwise"
    assert op_recorder.categorize("aten::cat") == "memory"
    assert op_recorder.categorize("aten::argmax") == "other"


# ---------------------------------------------------------------------------- matching


def _node(name, start, end, shapes=(), children=(), device_s=0.0):
    node = op_recorder._Node(name, start, end)
    node._shapes = tuple(shapes)
    node.children = list(children)
    node.device_s = device_s
    return node


def _call(i, name, shapes):
    return op_recorder.OpCall(i, name, shapes, "float32", 0, "none", 0, "", "", "other", match_shapes=shapes)


def test_match_rep_takes_the_outermost_event_with_the_name_and_shapes_in_order():
    a, b = ((4, 4),), ((4, 8),)
    calls = [_call(0, "aten::t", a), _call(1, "aten::addmm", b), _call(2, "aten::view", a)]
    rep = _node(
        "infer_opt::rep0",
        0,
        1000,
        children=[
            # a composite wrapper (not recorded) around two recorded ops; its own time is overhead
            _node(
                "aten::linear",
                0,
                500,
                children=[
                    _node("aten::t", 10, 30, a, children=[_node("aten::transpose", 12, 28, a)]),
                    _node(
                        "aten::addmm", 40, 440, b, children=[_node("aten::copy_", 50, 90, b)], device_s=2e-6
                    ),
                ],
            ),
            _node("aten::view", 600, 605, ((9, 9),)),  # same name, other shapes: not this call
            _node("aten::view", 700, 704, a),
        ],
    )
    times, subtracted = op_recorder.match_rep(rep, calls, on_cuda=False, overhead_per_event_s=5e-9)
    assert times == pytest.approx([20e-9 - 5e-9, 400e-9 - 5e-9, 4e-9])
    assert subtracted == pytest.approx(10e-9)
    cuda_times, _ = op_recorder.match_rep(rep, calls, on_cuda=True, overhead_per_event_s=0.0)
    assert cuda_times == pytest.approx([0.0, 2e-6, 0.0])


def test_match_rep_caps_the_overhead_correction_at_half_the_op():
    calls = [_call(0, "aten::mm", ((2, 2),))]
    rep = _node("r", 0, 100, children=[_node("aten::mm", 0, 10, ((2, 2),), children=[_node("x", 1, 2)] * 5)])
    times, _ = op_recorder.match_rep(rep, calls, on_cuda=False, overhead_per_event_s=1e-6)
    assert times == [pytest.approx(5e-9)]


def test_unmatched_calls_are_reported_as_none():
    calls = [_call(0, "aten::mm", ((2, 2),))]
    times, _ = op_recorder.match_rep(
        _node("r", 0, 10, children=[_node("aten::add", 0, 5)]), calls, False, 0.0
    )
    assert times == [None]


def test_a_call_missing_from_the_trace_does_not_stop_the_later_ones():
    a, b = ((4, 4),), ((8, 8),)
    calls = [_call(0, "aten::mul", a), _call(1, "aten::t", b), _call(2, "aten::mul", a)]
    # the first mul never ran under the profiler: the mul there is call 2's, not call 0's
    rep = _node("r", 0, 100, children=[_node("aten::t", 0, 10, b), _node("aten::mul", 20, 50, a)])
    times, _ = op_recorder.match_rep(rep, calls, False, 0.0)
    assert times == [None, pytest.approx(10e-9), pytest.approx(30e-9)]


def test_a_call_can_sit_inside_a_composite_with_a_later_calls_name():
    # where(cond, x, scalar) is a composite named like the where(cond, x, y) it runs
    m, none = ((1, 1, 8, 8),), ()
    calls = [_call(0, "aten::scalar_tensor", none), _call(1, "aten::where", m)]
    inner = [_node("aten::scalar_tensor", 12, 15), _node("aten::to", 16, 17), _node("aten::where", 20, 40, m)]
    rep = _node("r", 0, 100, children=[_node("aten::where", 10, 50, m, children=inner)])
    times, _ = op_recorder.match_rep(rep, calls, False, 0.0)
    assert times == [pytest.approx(3e-9), pytest.approx(20e-9)]


def test_reshape_alias_in_the_trace_is_the_recorded_view():
    x = torch.randn(3, 4, 5)

    def step():
        # a reshape of a non-contiguous tensor that needs no copy: aten::view under the
        # recording mode, aten::_reshape_alias under the profiler
        return x.transpose(0, 1).reshape(4, 3, 1, 5) * 2

    calls = op_recorder.record_ops(step)
    assert [c.name for c in calls] == ["aten::transpose", "aten::view", "aten::mul"]
    timings = op_recorder.time_ops(step, calls, reps=2, overhead_per_event_s=0.0)
    assert timings.unmatched == []


def test_time_ops_matches_every_call_of_a_real_step_and_writes_the_trace(tmp_path):
    model = models.build_builtin("tiny")
    ids = models.random_tokens(1, 16, model.config.vocab_size)

    def step():
        with torch.no_grad():
            return model(ids)

    calls = op_recorder.record_ops(step, model)
    trace = tmp_path / "trace.json"
    timings = op_recorder.time_ops(step, calls, reps=2, trace_path=trace, overhead_per_event_s=0.0)
    assert timings.unmatched == [] and len(timings.per_rep_s) == 2
    assert all(t is not None and t >= 0 for rep in timings.per_rep_s for t in rep)
    per_call = timings.median_per_call_s()
    # each repetition's ops lie inside it; with two repetitions the median is the mean, so the
    # per-call medians add up to at most the mean repetition (min() would depend on the load)
    for rep, total in zip(timings.per_rep_s, timings.rep_total_s, strict=True):
        assert sum(rep) <= total * (1 + 1e-9)
    assert 0 < sum(per_call) <= sum(timings.rep_total_s) / 2 * (1 + 1e-9)
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("name") == "aten::addmm" for e in events)


def _profiled_view(*, lean: bool) -> tuple[list[list[int]], list[object]]:
    """Shapes and argument values the profiler recorded for one ``view`` (a list argument)."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.ones(8, 4)
    lean_or_not = op_recorder.lean_profiler_records() if lean else contextlib.nullcontext()
    with lean_or_not, profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        x.view(32)
    event = next(e for e in prof.profiler.kineto_results.events() if e.name() == "aten::view")
    return event.shapes(), event.concrete_inputs()


@pytest.mark.skipif(
    not hasattr(torch._C._profiler, "_set_record_concrete_inputs_enabled_val"),
    reason="this torch has no switch for the profiler's argument values",
)
def test_lean_profiler_records_keep_shapes_drop_list_values_and_restore_torchs_default():
    assert _profiled_view(lean=False) == ([[8, 4], []], [None, [32]])  # torch's default
    assert _profiled_view(lean=True) == ([[8, 4], []], [None, None])  # shapes kept for the match
    with op_recorder.lean_profiler_records():
        with op_recorder.lean_profiler_records():
            pass
        # leaving an inner block does not turn the values back on for the outer one
        assert _profiled_view(lean=False)[1] == [None, None]
    assert _profiled_view(lean=False)[1] == [None, [32]]  # back on after the outermost block


def test_lean_profiler_records_without_the_switch_profile_as_before(monkeypatch):
    monkeypatch.delattr(torch._C._profiler, "_set_record_concrete_inputs_enabled_val", raising=False)
    with op_recorder.lean_profiler_records():
        assert _profiled_view(lean=False)[0] == [[8, 4], []]


def test_time_ops_and_the_overhead_estimate_profile_without_argument_values(monkeypatch):
    entered = []

    @contextlib.contextmanager
    def spy():
        entered.append(True)
        yield

    monkeypatch.setattr(op_recorder, "lean_profiler_records", spy)
    x = torch.ones(4, 4)
    calls = op_recorder.record_ops(lambda: x * 2)
    op_recorder.time_ops(lambda: x * 2, calls, reps=1)  # estimates its overhead per event, then times
    assert len(entered) == 2


def test_profiler_overhead_estimate_is_small():
    assert 0.0 <= op_recorder.profiler_overhead_per_event_s(samples=3, calls=100) < 50e-6


def test_merge_timings_concatenates_repetitions():
    a = op_recorder.OpTimings([[1.0, None]], "cpu", [2.0], 0.1, 0.5, [1])
    b = op_recorder.OpTimings([[3.0, 4.0]], "cpu", [5.0], 0.1, 0.7, [])
    merged = op_recorder.merge_timings([a, b])
    assert merged.per_rep_s == [[1.0, None], [3.0, 4.0]]
    assert merged.unmatched == [] and merged.rep_total_s == [2.0, 5.0]
    assert merged.median_per_call_s() == [2.0, 4.0]


def test_composite_ops_under_inference_mode_still_count_flops():
    layer = nn.Linear(64, 32)
    x = torch.randn(4, 16, 64)
    q = torch.randn(1, 2, 8, 16)

    def step():
        with torch.inference_mode():
            layer(x)
            F.scaled_dot_product_attention(q, q, q, is_causal=True)

    calls = op_recorder.record_ops(step)
    by_name = {c.name: c for c in calls}
    assert by_name["aten::linear"].flops == 2 * 4 * 16 * 64 * 32
    assert by_name["aten::scaled_dot_product_attention"].flops == 4 * 2 * 8 * 8 * 16 // 2  # is_causal: half
    assert by_name["aten::scaled_dot_product_attention"].category == "attention"


class _KinetoEvent:
    """The raw kineto event methods :func:`op_recorder._trace_forest` reads (torch's ``_KinetoEvent``)."""

    def __init__(self, name, start, dur, *, cuda=False, corr=0, linked=0, thread=1, shapes=(), activity=None):
        from torch.autograd import DeviceType

        self._name, self._start, self._dur = name, start, dur
        self._type = DeviceType.CUDA if cuda else DeviceType.CPU
        self._corr, self._linked, self._thread, self._shapes = corr, linked, thread, shapes
        if activity is None:
            activity = (
                "kernel" if cuda else ("user_annotation" if name.startswith("infer_opt::") else "cpu_op")
            )
            if name.startswith("cuda"):
                activity = "cuda_runtime"
        self._activity = activity

    def activity_type(self):
        return self._activity

    def name(self):
        return self._name

    def device_type(self):
        return self._type

    def is_async(self):
        return False

    def start_ns(self):
        return self._start

    def duration_ns(self):
        return self._dur

    def start_thread_id(self):
        return self._thread

    def correlation_id(self):
        return self._corr

    def linked_correlation_id(self):
        return self._linked

    def shapes(self):
        return [list(s) for s in self._shapes]


def test_cuda_kernels_are_charged_to_the_cpu_op_that_launched_them():
    """On a GPU each kernel (device event) carries the correlation id of the innermost CPU op
    that launched it; the CUDA runtime call (a CPU event with that link) and the GPU copy of our
    repetition marker are not op events nor work."""
    b, s = ((4, 8),), ((4, 4),)
    events = [
        _KinetoEvent("infer_opt::rep0", 0, 10_000, corr=1),
        _KinetoEvent("aten::linear", 100, 3_000, corr=2, shapes=b),
        _KinetoEvent("aten::addmm", 200, 2_000, corr=3, shapes=b),
        _KinetoEvent("cudaLaunchKernel", 300, 50, linked=3),  # runtime: skipped
        _KinetoEvent("aten::softmax", 4_000, 1_000, corr=4, shapes=s),
        _KinetoEvent("aten::_softmax", 4_100, 800, corr=5, shapes=s),
        _KinetoEvent("cudaLaunchKernel", 4_200, 50, linked=5),
        # device side
        _KinetoEvent("infer_opt::rep0", 150, 9_000, cuda=True, linked=1),  # gpu_user_annotation
        _KinetoEvent("sm90_xmma_gemm", 500, 7_000, cuda=True, linked=3),
        _KinetoEvent("softmax_warp_forward", 8_000, 1_500, cuda=True, linked=5),
    ]
    (rep,) = op_recorder._trace_forest(events)
    assert rep.device_total_s() == pytest.approx(8.5e-6)
    calls = [_call(0, "aten::addmm", b), _call(1, "aten::softmax", s)]
    times, subtracted = op_recorder.match_rep(rep, calls, on_cuda=True, overhead_per_event_s=0.0)
    # kernel time, not the host's launch time: softmax's kernel sits in its _softmax child
    assert times == pytest.approx([7e-6, 1.5e-6]) and subtracted == 0.0


def test_time_ops_on_cuda_without_kernel_activity_is_a_clear_failure(monkeypatch):
    """Without CUPTI the trace has the host side only: every op would read 0 s of kernel
    time. Simulated on the CPU build (torch drops the CUDA activity with a warning)."""
    from infer_opt.errors import RunFailure

    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    x = torch.ones(8, 8)

    def step():
        return x @ x

    calls = op_recorder.record_ops(step)
    with warnings.catch_warnings(), pytest.raises(RunFailure, match="no CUDA kernel activity"):
        warnings.simplefilter("ignore")  # "CUDA is not available, disabling CUDA profiling"
        op_recorder.time_ops(step, calls, device="cuda", reps=2, overhead_per_event_s=0.0)


def test_a_runtime_event_sharing_an_op_s_correlation_id_does_not_take_its_kernels():
    """CUDA runtime calls outside any op (the synchronize after each repetition) number their
    correlation ids apart from the ops': one can carry an op's id. Only op and annotation
    events are indexed, so the op keeps its kernel."""
    b = ((4, 8),)
    events = [
        _KinetoEvent("infer_opt::rep0", 0, 10_000, corr=1),
        _KinetoEvent("aten::addmm", 200, 2_000, corr=3, shapes=b),
        _KinetoEvent("cudaLaunchKernel", 300, 50, linked=3),
        _KinetoEvent("cudaDeviceSynchronize", 9_000, 900, corr=3),  # same id, not linked
        _KinetoEvent("sm90_xmma_gemm", 500, 7_000, cuda=True, linked=3),
    ]
    (rep,) = op_recorder._trace_forest(events)
    times, _ = op_recorder.match_rep(
        rep, [_call(0, "aten::addmm", b)], on_cuda=True, overhead_per_event_s=0.0
    )
    assert times == pytest.approx([7e-6])
    assert [child.name for child in rep.children] == ["aten::addmm"]  # the sync is not in the tree


def test_calls_that_launch_no_kernel_are_not_taken_for_a_missing_cupti():
    """Found on a lent H200: the calibration's views group (reshape, transpose: no kernel on a
    GPU) stopped the whole run with "no CUDA kernel activity (CUPTI unavailable?)". Whether CUPTI
    is there is read from any device event in the trace (the warm-up adds one kernel), not from
    the calls' own kernel time."""
    host_only = [
        _KinetoEvent("infer_opt::rep0", 0, 10_000, corr=1),
        _KinetoEvent("aten::view", 10, 5, corr=2),
    ]
    probe = _KinetoEvent("fill_kernel", 50, 1_000, cuda=True, linked=9)
    assert not op_recorder._device_activity(host_only)
    assert op_recorder._device_activity([*host_only, probe])
    (rep,) = op_recorder._trace_forest([*host_only, probe])
    assert rep.device_total_s() == 0.0  # the views' own time: none on the device
