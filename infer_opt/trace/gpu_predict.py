"""``infer-opt predict MODEL --calibration GPU-CAL``: a model step's GPU kernel time from a
calibration built from traces (:mod:`infer_opt.trace.calibrate`, docs/gpu_model.md).

``predict`` records the step's aten calls on fake tensors (:mod:`infer_opt.profilers.meta_record`)
and asks an operator model for each; :func:`model_for` gives it :class:`GpuStepModel` for a
trace calibration, which maps each recorded call onto the families a trace calibration holds:

* the recorder's families are the trace formulas' (``gemm.nt`` with ``M, N, K``, ``layer_norm``
  with ``rows, hidden``, ``add.t`` with ``n`` …: both follow ``op_families``), so most calls go
  through unchanged; one in another dtype than the calibration's takes the ``:dtype`` family
  when the traces had one, else the plain one;
* **fused attention**: on a CPU-only torch the fake tensors take the CPU's SDPA kernel
  (``sdpa.causal`` over ``B·H, T, d``, ``sdpa.decode`` over ``B·H, Tk, d`` …), not the GPU's; it
  is mapped to the GPU attention family the traces ran — flash, then efficient, cuDNN, math,
  the first the calibration has (causal or not as the call), with the features
  ``B·H, Tq, Tk, d``;
* views, allocations and host reads of a scalar launch no kernel: 0 (any other op the
  calibration has no family for gets its related families' or the device roofline's time);
* **the step replayed** (:meth:`GpuStepModel.replay_inputs`,
  :mod:`infer_opt.cost_models.step_replay`): the host issues each kernel-launching call after
  its family's issue cost in the traces (:mod:`infer_opt.trace.host_costs`: the Python, the
  views and the dispatch since the previous launching op; the median over all families for one
  the traces lack), a view costs nothing of its own (it is inside the next launch's cost), a
  host read of a scalar (``_local_scalar_dense``, ``.item()``) makes the host wait for the
  device; each call's kernels take their predicted time plus the traces' gap between queued
  kernels per kernel it launches. The step is where the replay ends, host- or device-bound.
* **the fitted host** (a calibration with ``host_launch_s``, ``host_python_s``, ``host_op_s``,
  :mod:`infer_opt.trace.host_fit`): the recorder counts, per call, the Python calls and the aten
  ops (the profiler's level) a real run makes before it
  (:class:`~infer_opt.profilers.op_recorder.HostCounter`), each call's aten ops with those its
  GPU kernel records below it in the traces (``host_op_children``); a launching call is issued
  after :func:`issue_cost` of the counts since the previous launching call, the step's first
  after ``c_launch`` alone (its span starts at its first kernel). This replaces the per-family
  medians, which carry the calibrating models' Python (Qwen's host +45% from other models').
* a calibration made before the issue costs were measured keeps the **gap term**: the traces'
  median gap between kernels, once per kernel-launching call, added serially (``host_s``);
* the ops table names a recorded fused attention by the GPU backend it is costed as
  (:meth:`GpuStepModel.op_name`): an H100 prediction lists
  ``aten::_scaled_dot_product_flash_attention``, not the CPU's ``..._for_cpu``.

Pure: numpy and the standard library.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from infer_opt.cost_models import op_model
from infer_opt.notices import Notice
from infer_opt.results.calibration import CalibrationResult
from infer_opt.trace import calibrate as tc
from infer_opt.trace.devices import normalize_dtype

#: GPU attention families, in the order one is picked for a recorded fused attention
ATTENTION = ("attention_flash", "attention_efficient", "attention_cudnn", "attention_math")
#: recorder families that launch no GPU kernel: views and allocations, a host read of a scalar
NO_KERNEL = ("view.", "other._local_scalar_dense")
NO_KERNEL_SOURCE = "no kernel"
#: recorder families where the host waits for the device (a host read of a device scalar)
HOST_SYNC = ("other._local_scalar_dense",)
#: the aten op that runs each GPU attention family (a recorded CPU attention is named by it)
ATTENTION_OPS = {
    "attention_flash": "aten::_scaled_dot_product_flash_attention",
    "attention_efficient": "aten::_scaled_dot_product_efficient_attention",
    "attention_cudnn": "aten::_scaled_dot_product_cudnn_attention",
    "attention_math": "aten::_scaled_dot_product_attention_math",
}


def model_for(calibration: CalibrationResult) -> op_model.OpModel:
    """The operator model ``predict`` uses for ``calibration``: :class:`GpuStepModel` for one
    built from traces, else the CPU's :class:`~infer_opt.cost_models.op_model.OpModel`."""
    return GpuStepModel(calibration) if calibration.from_traces else op_model.OpModel(calibration)


def _attention(family: str, features: Sequence[float]) -> tuple[bool, tuple[float, ...]] | None:
    """``(causal, (B·H, Tq, Tk, d))`` of a recorder's fused-attention family, None for another."""
    if not family.startswith("sdpa."):
        return None
    kind = family.removeprefix("sdpa.").removesuffix(".tail")
    f = tuple(float(v) for v in features)
    if kind in ("causal", "full") and len(f) >= 3:
        return kind == "causal", (f[0], f[1], f[1], f[2])
    if kind.startswith("decode") and len(f) >= 3:
        return False, (f[0], 1.0, f[1], f[2])
    if len(f) >= 4:
        return False, f[:4]
    return None


def issue_cost(calibration: op_model.CalibrationResult, python: float, ops: float) -> float:
    """``c_launch + c_python·p + c_op·o`` (:mod:`infer_opt.trace.host_fit`): the host's time to
    issue a launching op after ``python`` Python calls and ``ops`` aten ops; coefficients and
    counts below 0 (a hand-edited file) count as 0, so it is never negative."""
    c = calibration
    return (
        max(c.host_launch_s, 0.0)
        + max(c.host_python_s, 0.0) * max(python, 0.0)
        + max(c.host_op_s, 0.0) * max(ops, 0.0)
    )


class GpuStepModel(tc.TraceOpModel):
    """A trace calibration's model over ``predict``'s recorded calls (module docstring)."""

    def __init__(self, calibration: CalibrationResult) -> None:
        super().__init__(calibration)
        self.short_dtype = tc.SHORT_DTYPES.get(calibration.dtype, calibration.dtype)
        self.names = {key.rpartition("@")[0] for key in self.families}

    def attention_family(self, causal: bool) -> str:
        """The first of :data:`ATTENTION` the calibration has, with ``.causal`` as the call (the
        other causality when only that was traced); ``attention_flash`` (no family: the device
        roofline) when it has none."""
        wanted = [f"{a}.causal" if causal else a for a in ATTENTION]
        other = [f"{a}" if causal else f"{a}.causal" for a in ATTENTION]
        return next((f for f in (*wanted, *other) if f in self.names), wanted[0])

    def mapped(self, query: op_model.OpQuery, dtype: str = "") -> op_model.OpQuery | None:
        """The query in the calibration's families (None: the call launches no kernel)."""
        if query.family.startswith(NO_KERNEL):
            return None
        attention = _attention(query.family, query.features)
        if attention is not None:
            causal, features = attention
            return replace(query, family=self.attention_family(causal), features=features)
        short = normalize_dtype(dtype) if dtype else ""
        keyed = tc.family_key(query.family, None, short, self.short_dtype)
        return replace(query, family=keyed if keyed in self.names else query.family)

    def op_name(self, query: op_model.OpQuery) -> str:
        """The op's name in the GPU's step: a recorded fused attention as the backend it is
        costed as (``aten::_scaled_dot_product_flash_attention``), every other as recorded."""
        if _attention(query.family, query.features) is None:
            return query.name
        mapped = self.mapped(query)
        base = mapped.family.removesuffix(".causal") if mapped is not None else ""
        return ATTENTION_OPS.get(base, query.name)

    def replay_inputs(
        self, queries: Sequence[op_model.OpQuery], estimates: Sequence[op_model.OpEstimate]
    ) -> tuple[list[float], list[float], list[bool]] | None:
        """Per call its host issue cost, device time and host wait (module docstring); None for
        a calibration without issue costs (the serial gap term then)."""
        c = self.calibration
        counted = self.counts_host and all(q.host_counts is not None for q in queries)
        if not c.host_issue and c.host_issue_s <= 0 and not counted:
            return None
        issue = {h.family: h for h in c.host_issue}
        host, device, sync = [], [], []
        for q, e in zip(queries, estimates, strict=True):
            mapped = self.mapped(q)
            if mapped is None:
                host.append(0.0)
                device.append(0.0)
                sync.append(q.family.startswith(HOST_SYNC))
                continue
            row = issue.get(mapped.family.split(":")[0].removesuffix(".causal"))
            host.append(row.issue_s if row is not None else c.host_issue_s)
            device.append(e.time_s + c.queued_gap_s * (row.kernels if row is not None else 1.0))
            sync.append(False)
        fitted = self.fitted_host(queries, [self.mapped(q) is not None for q in queries])
        return (fitted if fitted is not None else host), device, sync

    @property
    def counts_host(self) -> bool:
        """The calibration holds the fitted host model (``predict`` then has the recorder count
        each call's Python calls and aten ops)."""
        c = self.calibration
        return max(c.host_launch_s, c.host_python_s, c.host_op_s) > 0

    def fitted_host(
        self, queries: Sequence[op_model.OpQuery], launching: Sequence[bool]
    ) -> list[float] | None:
        """Per call its host cost from the fitted model (module docstring): a launching call is
        issued after :func:`issue_cost` of the counts since the previous launching call (the
        step's first after ``c_launch`` alone: a step's span starts at its first kernel), each
        call's aten ops with those its GPU kernel records below it; 0 for the others. None:
        no fitted model, or a call without counts."""
        if not self.counts_host or any(q.host_counts is None for q in queries):
            return None
        c = self.calibration
        children = dict(c.host_op_children)
        out, python, ops, first = [], 0, 0.0, True
        for q, launches in zip(queries, launching, strict=True):
            python += q.host_counts[0]
            ops += q.host_counts[1] + children.get(self.op_name(q), 0.0)
            if not launches:
                out.append(0.0)
                continue
            out.append(issue_cost(c, 0, 0.0) if first else issue_cost(c, python, ops))
            python, ops, first = 0, 0.0, False
        return out

    def estimate(self, query: op_model.OpQuery) -> op_model.OpEstimate:
        mapped = self.mapped(query)
        if mapped is None:
            return op_model.OpEstimate(0.0, NO_KERNEL_SOURCE, "", False, 0.0, "launch")
        return super().estimate(replace(mapped, reuse_bytes=None, context_bytes=None))

    def notices(self) -> list[Notice]:
        """What a prediction from it is (``gpu_trace_replay``; ``gpu_trace_prediction`` for a
        calibration without issue costs)."""
        c = self.calibration
        values = {
            "device": c.device_name,
            "source": c.source,
            "attention": self.attention_family(True).removesuffix(".causal"),
            "gap_s": c.kernel_gap_s,
        }
        if self.counts_host:
            values |= {"launch_s": c.host_launch_s, "python_s": c.host_python_s, "op_s": c.host_op_s}
        if c.host_issue or c.host_issue_s > 0 or self.counts_host:
            values |= {"issue_s": c.host_issue_s, "queued_gap_s": c.queued_gap_s}
            return [Notice("gpu_trace_replay", values)]
        return [Notice("gpu_trace_prediction", values)]

    def host_time(self, queries: Sequence[op_model.OpQuery], n_module_calls: int) -> float:
        """The gap term: the traces' median gap between kernels per kernel-launching call."""
        launching = sum(1 for q in queries if not q.family.startswith(NO_KERNEL))
        return self.calibration.kernel_gap_s * launching
