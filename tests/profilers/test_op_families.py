"""Op families and signatures: what calibration and prediction key a call by."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.errors import RunFailure
from infer_opt.profilers import op_families, op_recorder
from infer_opt.profilers.op_families import FamilyRecorder, ModuleCounter, aten_view_strides, layout


def families(fn, model=None) -> list[tuple[str, tuple[int, ...]]]:
    recorder = FamilyRecorder()
    op_recorder.record_ops(fn, model, recorder=recorder)
    assert len(recorder.signatures) == len(recorder.calls)
    return [(s.family, s.features) for s in recorder.signatures]


def test_linear_is_a_gemm_with_a_transposed_weight_and_its_t_view():
    x, w, b = torch.randn(5, 16), torch.randn(32, 16), torch.randn(32)
    assert families(lambda: F.linear(x, w, b)) == [("view.t", ()), ("gemm.nt", (5, 32, 16))]
    assert families(lambda: F.linear(x, w))[-1] == ("gemm.nt", (5, 32, 16))


def test_a_row_major_weight_is_the_nn_layout():
    x, w, b = torch.randn(5, 16), torch.randn(16, 32), torch.randn(32)
    assert families(lambda: torch.addmm(b, x, w)) == [("gemm.nn", (5, 32, 16))]


def test_attention_kinds(monkeypatch):
    monkeypatch.setattr(op_families, "cpu_vector_lanes", lambda: 8)
    q, k = torch.randn(2, 4, 8, 16), torch.randn(2, 4, 8, 16)
    one, cache = torch.randn(2, 4, 1, 16), torch.randn(2, 4, 33, 16)
    mask = torch.ones(4, 33, dtype=torch.bool).tril(29)
    assert families(lambda: F.scaled_dot_product_attention(q, k, k, is_causal=True)) == [
        ("sdpa.causal", (8, 8, 16))
    ]
    assert families(lambda: F.scaled_dot_product_attention(q, k, k)) == [("sdpa.full", (8, 8, 16))]
    assert families(lambda: F.scaled_dot_product_attention(one, cache, cache)) == [
        ("sdpa.decode", (8, 33, 16))
    ]
    grouped = torch.randn(2, 2, 33, 16)
    assert families(lambda: F.scaled_dot_product_attention(one, grouped, grouped, enable_gqa=True)) == [
        ("sdpa.decode.gqa", (8, 33, 16, 2))
    ]
    four = torch.randn(2, 4, 4, 16)
    assert families(lambda: F.scaled_dot_product_attention(four, cache, cache, attn_mask=mask))[-1] == (
        "sdpa.masked",
        (8, 4, 33, 16),
    )


@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_prefill_attention_off_the_vector_width_is_its_own_family(monkeypatch, lanes):
    """A fused attention whose length is not a multiple of the CPU's vector width finishes every
    row in scalar code (``.tail``); decode attention (one row per head) stays one family."""
    monkeypatch.setattr(op_families, "cpu_vector_lanes", lambda: lanes)
    for t in (lanes, 2 * lanes, lanes + 1, 3 * lanes - 1, 40):
        q = torch.randn(1, 2, t, 8)
        tail = ".tail" if t % lanes else ""
        assert families(lambda q=q: F.scaled_dot_product_attention(q, q, q, is_causal=True)) == [
            (f"sdpa.causal{tail}", (2, t, 8))
        ]
        assert families(lambda q=q: F.scaled_dot_product_attention(q, q, q))[0][0] == f"sdpa.full{tail}"
        one = torch.randn(1, 2, 1, 8)
        assert families(lambda q=q, one=one: F.scaled_dot_product_attention(one, q, q))[0][0] == "sdpa.decode"


def test_cpu_vector_lanes_follows_torchs_cpu_capability(monkeypatch):
    op_families.cpu_vector_lanes.cache_clear()
    try:
        for capability, lanes in (("AVX512", 16), ("AVX2", 8), ("DEFAULT", 4), ("NO AVX", 4)):
            monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda c=capability: c)
            op_families.cpu_vector_lanes.cache_clear()
            assert op_families.cpu_vector_lanes() == lanes
    finally:
        monkeypatch.undo()
        op_families.cpu_vector_lanes.cache_clear()


def test_pointwise_patterns_and_strided_operands():
    x, y, row = torch.randn(8, 64), torch.randn(8, 64), torch.randn(64)
    assert families(lambda: x + y) == [("add.t", (512,))]
    assert families(lambda: x + row) == [("add.b", (512,))]
    assert families(lambda: x * 2.0) == [("mul.s", (512,))]
    assert families(lambda: x.t() * 2.0)[-1] == ("mul.s.nc", (512,))
    assert families(lambda: F.gelu(x, approximate="tanh")) == [("gelu_tanh.s", (512,))]
    assert families(lambda: F.gelu(x)) == [("gelu.s", (512,))]
    assert families(lambda: x.mean(-1, keepdim=True)) == [("mean.r", (8, 64))]


def test_norms_softmax_embedding_copies():
    x, w = torch.randn(6, 32), torch.ones(32)
    assert families(lambda: F.layer_norm(x, (32,), w, w)) == [("layer_norm", (6, 32))]
    assert families(lambda: torch.softmax(x, -1)) == [("softmax", (6, 32))]
    table, idx = torch.randn(100, 32), torch.tensor([[1, 2, 3]])
    assert families(lambda: F.embedding(idx, table)) == [("embedding", (3, 32))]
    y = torch.randn(2, 3, 4, 8)
    assert families(lambda: y.transpose(1, 2).contiguous())[-1] == ("clone.s", (192,))


def test_embedding_reads_only_its_rows():
    table, idx = torch.randn(1000, 32), torch.tensor([1, 2])
    recorder = FamilyRecorder()
    op_recorder.record_ops(lambda: F.embedding(idx, table), recorder=recorder)
    sig = recorder.signatures[0]
    assert sig.work_bytes == pytest.approx(2 * 2 * 32 * 4 + 2 * 8)  # rows read + written, indices
    assert sig.touches.main == (0,)


def test_layout_names():
    w = torch.randn(32, 16)
    assert layout(w) == "n"
    assert layout(w.t()) == "t"
    assert layout(torch.randn(4, 8, 16)[:, ::2]) == "n"  # a leading dimension larger than the row
    assert layout(torch.randn(8, 8)[::2, ::2]) == "s"


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=4),
    st.permutations(range(4)),
    st.booleans(),
)
def test_aten_view_strides_match_a_real_view(shape, order, flatten):
    x = torch.empty(shape)
    dims = [d for d in order if d < x.ndim]
    y = x.permute(*dims)
    target = [y.numel()] if flatten else [*y.shape, 1]
    try:
        real = y.view(target)
    except RuntimeError:
        assert aten_view_strides(tuple(y.shape), y.stride(), target) is None
        return
    assert aten_view_strides(tuple(y.shape), y.stride(), target) == real.stride()


def test_fake_tensor_checks_are_answered_true_and_values_are_refused():
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    with mode:
        x = torch.empty(3)
    recorder = FamilyRecorder()
    with mode:
        calls = op_recorder.record_ops(lambda: bool((x == 0).all()), recorder=recorder)
    assert [c.name for c in calls][-1] == "aten::_local_scalar_dense"
    assert not any(c.name.startswith("prim::") for c in calls)
    with mode, pytest.raises(RunFailure, match="hold no data"):
        op_recorder.record_ops(lambda: float(x.sum()), recorder=FamilyRecorder())


def test_module_counter_counts_module_calls():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    with ModuleCounter() as counter:
        model(torch.randn(1, 4))
    assert counter.count == 3
