from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from infer_opt.cost_models import bucketing
from infer_opt.errors import InvalidInput, RunFailure
from infer_opt.messages import text
from infer_opt.profilers import amortize_measure
from infer_opt.results import load_result, save_result
from infer_opt.results.amortize_measure import AmortizeMeasureResult, BucketSpec

MS = 1_000_000  # ns


pytestmark = pytest.mark.usefixtures("one_thread")


class FakeClock:
    """Nanoseconds that only move when a fake model runs."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


class FakeModel:
    """A 'model' whose call costs ``cost_ns`` on the fake clock."""

    def __init__(self, clock: FakeClock, cost_ns: int, seq_len: int = 32) -> None:
        self.clock, self.cost_ns, self.seq_len = clock, cost_ns, seq_len

    def __call__(self, *args, **kwargs):
        self.clock.now += self.cost_ns
        return torch.ones(3)


class FakeCompiler:
    """Compiling costs ``compile_ns`` on the first call, then each call ``cost_ns``; it can
    fail for chosen sequence lengths or return a wrong output."""

    def __init__(self, clock, compile_ns=3_000 * MS, cost_ns=MS * 3 // 2, fail_for=(), wrong_for=()):
        self.clock, self.compile_ns, self.cost_ns = clock, compile_ns, cost_ns
        self.fail_for, self.wrong_for = set(fail_for), set(wrong_for)
        self.compiled: list[int] = []

    def __call__(self, model, *, dynamic, backend):
        assert dynamic is False
        self.compiled.append(model.seq_len)
        if model.seq_len in self.fail_for:
            raise RuntimeError(f"inductor blew up at T={model.seq_len}")
        first = [True]
        wrong = model.seq_len in self.wrong_for

        def run(*args, **kwargs):
            self.clock.now += self.cost_ns + (self.compile_ns if first[0] else 0)
            first[0] = False
            return torch.ones(3) * (2.0 if wrong else 1.0)

        return run


def _loader(clock, eager_ns=2 * MS, calls=None):
    def load(spec: BucketSpec) -> amortize_measure.BucketInputs:
        if calls is not None:
            calls.append(spec.name)
        return amortize_measure.BucketInputs(FakeModel(clock, eager_ns, spec.seq_len), (), {})

    return load


def _sweep(specs, compiler, clock, **kwargs):
    return amortize_measure.measure_sweep(
        specs,
        kwargs.pop("loader", _loader(clock)),
        device="cpu",
        dtype_name="float32",
        warmup=1,
        reps=3,
        compile_fn=compiler,
        clock=clock,
        **kwargs,
    )


def _result(rows, specs, calls=None):
    return amortize_measure.build_result(
        rows, model="fake", device="cpu", device_name="cpu", dtype="float32", backend="inductor",
        cuda_graphs=False, warmup=1, reps=3, compile_caches="n/a", requested=specs, calls=calls,
        calls_source=None if calls is None else "test",
    )  # fmt: skip


SPECS = [BucketSpec(1, 32), BucketSpec(1, 64), BucketSpec(1, 128)]


def test_exact_costs_with_a_fake_clock_reproduce_the_worked_example():
    clock = FakeClock()
    row = amortize_measure.measure_bucket(
        SPECS[0],
        amortize_measure.BucketInputs(FakeModel(clock, 2 * MS), (), {}),
        device="cpu",
        dtype_name="float32",
        warmup=1,
        reps=3,
        compile_fn=FakeCompiler(clock, compile_ns=3_000 * MS + MS // 2),
        clock=clock,
    )
    assert row.eager_s == pytest.approx(2e-3, abs=1e-15) and row.eager.iqr_s == 0
    assert row.compiled_s == pytest.approx(1.5e-3, abs=1e-15)
    assert row.first_call_s == pytest.approx(3.002)  # compile + one compiled run
    assert row.compile_s == pytest.approx(3.0)  # first call - one eager step
    assert row.output_rel_error == 0.0 and row.error is None and not row.failed
    # C = 3 s, 2 ms -> 1.5 ms: break-even after exactly 6000 calls (SPEC §1.4)
    at, above = _result([row], SPECS[:1], {"1x32": 6000}), _result([row], SPECS[:1], {"1x32": 6001})
    assert at.buckets[0].break_even_calls == 6000.0
    assert at.buckets[0].net_gain_s == 0.0 and at.buckets[0].compile is False
    assert above.buckets[0].compile is True and above.total_net_gain_s == pytest.approx(0.0005)


class FakeGraphs:
    """Stands in for CUDA graph capture: capturing costs ``capture_ns``, a replay ``replay_ns``."""

    def __init__(self, clock, capture_ns=500 * MS, replay_ns=MS, fail=False):
        self.clock, self.capture_ns, self.replay_ns, self.fail = clock, capture_ns, replay_ns, fail

    def capture(self, fn, calls):
        if self.fail:
            raise RunFailure("CUDA graph capture failed: operation not permitted when stream is capturing")
        self.clock.now += self.capture_ns

        def replay():
            self.clock.now += self.replay_ns

        return replay


def _graph_bucket(graphs):
    clock = graphs.clock
    return amortize_measure.measure_bucket(
        SPECS[0], amortize_measure.BucketInputs(FakeModel(clock, 2 * MS), (), {}), device="cpu",
        dtype_name="float32", warmup=1, reps=3,
        compile_fn=FakeCompiler(clock, compile_ns=3_000 * MS + MS // 2), clock=clock,
        cuda_graphs=True, cuda_backend=graphs,
    )  # fmt: skip


def test_a_cuda_graph_adds_its_capture_to_c_and_replays_as_t_c():
    row = _graph_bucket(FakeGraphs(FakeClock()))
    assert row.graph_capture_s == pytest.approx(0.5) and row.compile_s == pytest.approx(3.5)
    assert row.compiled_s == pytest.approx(1e-3) and row.compiled_no_graph_s == pytest.approx(1.5e-3)


def test_a_failed_graph_capture_keeps_the_compiled_numbers():
    row = _graph_bucket(FakeGraphs(FakeClock(), fail=True))
    assert not row.failed and row.graph_capture_s is None
    assert row.compile_s == pytest.approx(3.0) and row.compiled_s == pytest.approx(1.5e-3)
    (failed,) = [w for w in row.warnings if w.code == "graph_capture_failed"]
    assert failed["reason"] == "CUDA graph capture failed: operation not permitted when stream is capturing"
    assert text(failed).startswith("CUDA graph capture failed")


def test_a_capture_that_breaks_the_device_stops_the_sweep_keeping_earlier_buckets():
    from infer_opt.profilers.timing import CaptureFailed

    clock = FakeClock()

    class Breaks(FakeGraphs):
        def capture(self, fn, calls):
            if self.captures:
                raise CaptureFailed(
                    "CUDA graph capture failed: RuntimeError: illegal memory access", device_usable=False
                )
            self.captures += 1
            return super().capture(fn, calls)

    graphs = Breaks(clock)
    graphs.captures = 0
    saved = []
    with pytest.raises(
        RunFailure, match=r"^bucket 1x64: CUDA graph capture failed.*illegal memory access.*sweep stops"
    ):
        amortize_measure.measure_sweep(
            SPECS, _loader(clock), device="cpu", dtype_name="float32", warmup=1, reps=3, cuda_graphs=True,
            compile_fn=FakeCompiler(clock), clock=clock, cuda_backend=graphs,
            on_bucket=lambda rows, left: saved.append([r.bucket for r in rows]),
        )  # fmt: skip
    assert saved == [["1x32"]]


def test_a_failing_compile_marks_its_bucket_and_the_sweep_goes_on():
    clock = FakeClock()
    compiler = FakeCompiler(clock, fail_for={64})
    saved = []
    rows = _sweep(SPECS, compiler, clock, on_bucket=lambda rows, left: saved.append((len(rows), left)))
    assert [r.bucket for r in rows] == ["1x32", "1x64", "1x128"] and compiler.compiled == [32, 64, 128]
    assert saved == [(1, 2), (2, 1), (3, 0)]
    failed = rows[1]
    assert failed.failed and "RuntimeError: inductor blew up at T=64" in failed.error
    assert failed.eager_s > 0 and failed.compile_s is None and failed.compiled_s is None
    result = _result(rows, SPECS, {"1x32": 1e6, "1x64": 1e6, "1x128": 10})
    decided = {b.bucket: b for b in result.buckets}
    assert decided["1x64"].compile is False and decided["1x64"].net_gain_s == 0.0
    assert decided["1x64"].reason.startswith("compiling failed: RuntimeError")
    assert decided["1x32"].compile is True and decided["1x128"].compile is False
    assert result.failed_count == 1 and result.compiled_count == 1
    assert result.total_net_gain_s == pytest.approx(decided["1x32"].net_gain_s)


def test_a_compiled_output_that_differs_is_not_compiled():
    clock = FakeClock()
    rows = _sweep(SPECS[:1], FakeCompiler(clock, wrong_for={32}), clock)
    assert rows[0].failed and "differs from eager" in rows[0].error


def test_resume_skips_the_buckets_already_measured():
    clock = FakeClock()
    first = _sweep(SPECS[:1], FakeCompiler(clock), clock)
    loaded = []
    compiler = FakeCompiler(clock)
    rows = _sweep(SPECS, compiler, clock, previous=first, loader=_loader(clock, calls=loaded))
    assert loaded == ["1x64", "1x128"] and compiler.compiled == [64, 128]
    assert rows[0] is first[0] and [r.bucket for r in rows] == ["1x32", "1x64", "1x128"]


def test_a_partial_result_lists_the_pending_buckets_and_round_trips(tmp_path):
    clock = FakeClock()
    rows = _sweep(SPECS[:2], FakeCompiler(clock), clock)
    partial = _result(rows, SPECS)
    assert partial.pending == ("1x128",) and not partial.complete
    assert partial.total_net_gain_s is None and all(b.compile is None for b in partial.buckets)
    assert all(b.break_even_calls == pytest.approx(b.compile_s / 0.0005) for b in partial.buckets)
    path = save_result(tmp_path / "sweep.json", partial)
    again = load_result(path).result
    assert isinstance(again, AmortizeMeasureResult) and again.buckets == partial.buckets


def test_resume_from_another_setup_is_refused():
    clock = FakeClock()
    previous = _result(_sweep(SPECS[:1], FakeCompiler(clock), clock), SPECS)
    same = {"model": "fake", "device_name": "cpu", "dtype": "float32", "backend": "inductor"}
    amortize_measure.check_resumable(previous, option="--resume", **same)
    for key, other in (("model", "tiny"), ("device_name", "NVIDIA H200"), ("dtype", "bfloat16")):
        with pytest.raises(InvalidInput, match="--resume"):
            amortize_measure.check_resumable(previous, option="--resume", **{**same, key: other})


def test_an_eager_failure_stops_the_run():
    class Broken:
        seq_len = 32

        def __call__(self, *args, **kwargs):
            raise ValueError("shape mismatch")

    with pytest.raises(RunFailure, match="bucket 1x32"):
        amortize_measure.measure_bucket(
            SPECS[0],
            amortize_measure.BucketInputs(Broken(), (), {}),
            device="cpu",
            dtype_name="float32",
            warmup=0,
            reps=1,
        )


def test_calls_from_a_length_sample_use_the_bucketing_rule():
    sample = bucketing.sample_from_lengths(np.array([10, 20, 32, 40, 50, 60]))
    assert amortize_measure.calls_from_sample((32, 64), sample, batch=1, requests=None) == {32: 3.0, 64: 3.0}
    assert amortize_measure.calls_from_sample((32, 64), sample, batch=2, requests=600) == {
        32: 150.0,
        64: 150.0,
    }
    with pytest.raises(InvalidInput, match="above the largest bound"):
        amortize_measure.calls_from_sample((16, 32), sample, batch=1, requests=None)


def test_the_default_loader_reuses_a_builtin_and_checks_factories(tmp_path):
    load = amortize_measure.default_loader("tiny", device="cpu", dtype=torch.float32)
    a, b = load(BucketSpec(1, 8)), load(BucketSpec(2, 16))
    assert a.model is b.model and a.args[0].shape == (1, 8) and b.args[0].shape == (2, 16)
    factory = tmp_path / "fixed.py"
    factory.write_text(
        "import torch\n\ndef make():\n    return torch.nn.Linear(4, 4), (torch.zeros(1, 4),)\n"
    )
    with pytest.raises(InvalidInput, match="takes batch_size and seq_len"):
        amortize_measure.default_loader(f"{factory}:make", device="cpu", dtype=torch.float32)(
            BucketSpec(1, 8)
        )


def test_a_real_tiny_bucket_with_the_eager_backend():
    load = amortize_measure.default_loader("tiny", device="cpu", dtype=torch.float32)
    row = amortize_measure.measure_bucket(
        BucketSpec(1, 8), load(BucketSpec(1, 8)), device="cpu", dtype_name="float32",
        warmup=0, reps=2, compile_fn=lambda model, **kw: model,
    )  # fmt: skip
    assert not row.failed and row.eager_s > 0 and row.compiled_s > 0
    assert row.output_rel_error == 0.0 and row.eager_peak_bytes is None


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("INFER_OPT_SLOW") != "1", reason="a real inductor compile: set INFER_OPT_SLOW=1"
)
def test_a_real_inductor_compile_of_one_bucket():
    load = amortize_measure.default_loader("tiny", device="cpu", dtype=torch.float32)
    assert amortize_measure.warm_up_compiler("cpu") is not None
    with amortize_measure.cold_compiles(True):
        row = amortize_measure.measure_bucket(
            BucketSpec(1, 16),
            load(BucketSpec(1, 16)),
            device="cpu",
            dtype_name="float32",
            warmup=1,
            reps=5,
        )
    assert not row.failed, row.error
    assert row.compile_s > 0.1 and row.output_rel_error < amortize_measure.OUTPUT_TOLERANCE["float32"]


@pytest.mark.gpu
def test_cuda_graph_capture_is_timed_and_added_to_the_compile_cost():
    load = amortize_measure.default_loader("tiny", device="cuda", dtype=torch.float32)
    row = amortize_measure.measure_bucket(
        BucketSpec(1, 16), load(BucketSpec(1, 16)), device="cuda", dtype_name="float32",
        warmup=1, reps=5, cuda_graphs=True, compile_fn=lambda model, **kw: model,
    )  # fmt: skip
    assert not row.failed, row.error
    assert row.graph_capture_s > 0 and row.compiled_no_graph_s > 0
    assert row.compile_s == pytest.approx(max(0.0, row.first_call_s - row.eager_s) + row.graph_capture_s)
    assert row.eager_peak_bytes > 0 and row.compiled_peak_bytes > 0
