"""FLOPs and bytes from recorded shapes: worked numbers, invariants, and profile's formulas."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.errors import InvalidInput
from infer_opt.trace.op_costs import dtype_key, op_cost, shapes_key


def rec(*inputs):
    """Recorded args from (dims, type[, strides[, concrete]]) tuples, as torch.profiler writes them."""
    dims, types, strides, concrete = [], [], [], []
    for item in inputs:
        d, t = item[0], item[1]
        s = (
            item[2]
            if len(item) > 2
            else ([] if t in ("Scalar", "ScalarList", "", "TensorList") else _contig(d))
        )
        dims.append(d)
        types.append(t)
        strides.append(s)
        concrete.append(item[3] if len(item) > 3 else "")
    return {"Input Dims": dims, "Input type": types, "Input Strides": strides, "Concrete Inputs": concrete}


def _contig(shape):
    out, acc = [], 1
    for size in reversed(shape):
        out.append(acc)
        acc *= size
    return list(reversed(out))


BF = "c10::BFloat16"


def test_mm_bmm_addmm_linear_exact():
    c = op_cost("aten::mm", rec(([64, 32], BF), ([32, 16], BF)))
    assert c.flops == 2 * 64 * 16 * 32
    assert c.bytes == 2 * (64 * 32 + 32 * 16 + 64 * 16)
    assert c.family == "gemm.nn" and c.features == (64, 16, 32) and c.dtype == "bf16"
    c = op_cost("aten::bmm", rec(([8, 64, 32], BF), ([8, 32, 16], BF)))
    assert c.flops == 2 * 8 * 64 * 16 * 32 and c.family == "bmm.nn"
    # addmm(bias, A, B^T view): + M·N for the bias, nn.Linear's layout is gemm.nt
    c = op_cost(
        "aten::addmm",
        rec(([16], BF), ([64, 32], BF), ([32, 16], BF, [1, 32]), ([], "Scalar"), ([], "Scalar")),
    )
    assert c.flops == 2 * 64 * 16 * 32 + 64 * 16 and c.family == "gemm.nt"
    assert c.bytes == 2 * (16 + 64 * 32 + 32 * 16 + 64 * 16)
    # linear with batch dims, with and without bias
    c = op_cost("aten::linear", rec(([4, 141, 512], BF), ([2048, 512], BF), ([2048], BF)))
    assert c.flops == 2 * 4 * 141 * 2048 * 512 + 4 * 141 * 2048
    c = op_cost("aten::linear", rec(([4, 141, 512], BF), ([2048, 512], BF), ([], "")))
    assert c.flops == 2 * 4 * 141 * 2048 * 512 and c.features == (4 * 141, 2048, 512)


def test_matmul_broadcasts_batch_dims():
    c = op_cost("aten::matmul", rec(([2, 1, 8, 64, 32], BF), ([3, 1, 32, 16], BF)))
    assert c.flops == 2 * (2 * 3 * 8) * 64 * 16 * 32
    assert op_cost("aten::matmul", rec(([32], BF), ([32, 16], BF))).flops == 2 * 16 * 32


def test_out_argument_is_not_an_input():
    plain = op_cost("aten::mm", rec(([64, 32], BF), ([32, 16], BF)))
    with_out = op_cost("aten::mm", rec(([64, 32], BF), ([32, 16], BF), ([64, 16], BF)))
    assert with_out.bytes == plain.bytes and with_out.flops == plain.flops
    add = op_cost("aten::add", rec(([10, 10], BF), ([10, 10], BF), ([], "Scalar", [], "1")))
    add_out = op_cost(
        "aten::add", rec(([10, 10], BF), ([10, 10], BF), ([], "Scalar", [], "1"), ([10, 10], BF))
    )
    assert add_out.bytes == add.bytes == 3 * 100 * 2


def _sdpa(name, b, h, tq, tk, d, causal):
    q, k = [b, h, tq, d], [b, h, tk, d]
    scalars = {
        "aten::_scaled_dot_product_flash_attention": ["0.", str(causal), "False", ""],
        "aten::_scaled_dot_product_efficient_attention": ["False", "0.", str(causal), ""],
    }[name]
    lead = [] if name.endswith("flash_attention") else [([], "")]
    return op_cost(name, rec((q, BF), (k, BF), (k, BF), *lead, *[([], "Scalar", [], v) for v in scalars]))


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("aten::_scaled_dot_product_flash_attention", "attention_flash"),
        ("aten::_scaled_dot_product_efficient_attention", "attention_efficient"),
    ],
)
def test_sdpa_full_and_causal(name, family):
    full = _sdpa(name, 2, 8, 128, 128, 64, False)
    assert full.flops == 4 * 2 * 8 * 128 * 128 * 64 and full.family == family and full.causal is False
    causal = _sdpa(name, 2, 8, 128, 128, 64, True)
    assert causal.causal is True and causal.flops == full.flops / 2


def test_sdpa_causal_convention_full_and_bthd_layout():
    args = rec(
        *([[1, 141, 8, 64], BF] for _ in range(3)),
        ([], ""),
        ([], ""),
        ([], "Scalar", [], "141"),
        ([], "Scalar", [], "141"),
        ([], "Scalar", [], "0."),
        ([], "Scalar", [], "True"),
    )
    c = op_cost("aten::_flash_attention_forward", args, causal="full")
    assert c.causal is True and c.flops == 4 * 8 * 141 * 141 * 64
    assert op_cost("aten::_flash_attention_forward", args).flops == 2 * 8 * 141 * 141 * 64
    with pytest.raises(InvalidInput):
        op_cost("aten::_flash_attention_forward", args, causal="quarter")


def test_conv_from_concrete_inputs():
    args = rec(
        ([128, 3, 224, 224], BF),
        ([768, 3, 16, 16], BF),
        ([768], BF),
        ([], "ScalarList", [], "[16, 16]"),
        ([], "ScalarList", [], "[0, 0]"),
        ([], "ScalarList", [], "[1, 1]"),
        ([], "Scalar", [], "False"),
        ([], "ScalarList", [], "[0, 0]"),
        ([], "Scalar", [], "1"),
    )
    c = op_cost("aten::convolution", args)
    assert c.flops == 2 * 128 * 768 * 14 * 14 * 3 * 16 * 16 and c.family == "conv2d"
    assert c.bytes == 2 * (128 * 3 * 224 * 224 + 768 * 3 * 16 * 16 + 768 + 128 * 768 * 14 * 14)
    # keyed by the implicit GEMM it runs as: M = 128·14·14 positions, N = 768, K = 3·16·16
    assert c.features == (25088, 768, 768, 1)


def _conv_args(x, w, stride, padding, dilation, transposed, out_pad, groups):
    lit = ("ScalarList", [])
    return rec(
        (list(x), "float"), (list(w), "float"), ([], ""), ([], *lit, str(stride)), ([], *lit, str(padding)),
        ([], *lit, str(dilation)), ([], "Scalar", [], str(transposed)), ([], *lit, str(out_pad)),
        ([], "Scalar", [], str(groups)),
    )  # fmt: skip


@given(
    n=st.integers(1, 3), g=st.sampled_from([1, 2, 4]), cin=st.integers(1, 3), cout=st.integers(1, 3),
    size=st.integers(5, 12), k=st.integers(1, 3), stride=st.integers(1, 3), pad=st.integers(0, 1),
    transposed=st.booleans(),
)  # fmt: skip
def test_conv_features_are_a_gemm_of_its_flops(n, g, cin, cout, size, k, stride, pad, transposed):
    """Invariant: ``2·groups·M·N·K`` is the convolution's FLOPs, grouped or transposed."""
    c_in, c_out = cin * g, cout * g
    w = (c_in, c_out // g, k, k) if transposed else (c_out, c_in // g, k, k)
    args = _conv_args((n, c_in, size, size), w, [stride] * 2, [pad] * 2, [1, 1], transposed, [0, 0], g)
    c = op_cost("aten::convolution", args)
    m, n_, k_, groups = c.features
    assert groups == g and 2 * groups * m * n_ * k_ == c.flops


def test_an_unbatched_conv_is_one_image():
    args = rec(
        ([3, 224, 224], BF), ([768, 3, 16, 16], BF), ([768], BF), ([], "ScalarList", [], "[16, 16]"),
        ([], "ScalarList", [], "[0, 0]"), ([], "ScalarList", [], "[1, 1]"), ([], "Scalar", [], "1"),
    )  # fmt: skip
    c = op_cost("aten::conv2d", args)
    assert c.features == (196, 768, 768, 1)
    assert c.flops == 2 * 196 * 768 * 768


@pytest.mark.parametrize(("image", "stride"), [(8, 1), (224, -16), (224, 0)])
def test_a_conv_geometry_torch_refuses_has_no_formula(image, stride):
    """A kernel larger than the padded image, or a stride below 1, has no output to count (not
    negative FLOPs or features)."""
    args = _conv_args((1, 3, image, image), (768, 3, 16, 16), [stride] * 2, [0, 0], [1, 1], False, [0, 0], 1)
    assert op_cost("aten::convolution", args) is None


def test_a_pointwise_op_of_two_floating_dtypes_is_mixed():
    """The class: owlv2's in-place bf16 ``add_`` of an fp32 tensor runs ATen's casting loop
    (4.4 µs over 20736 elements on the H100, a bf16 add over 72192 took 1.6) and, as ``add.t``,
    made every small bf16 add between its shapes twice too slow."""
    assert op_cost("aten::add_", rec(([1, 5184, 4], BF), ([5184, 4], "float"), ([], "Scalar"))).family == (
        "add.t.mixed"
    )
    assert op_cost("aten::add", rec(([5184, 4], BF), ([5184, 4], BF), ([], "Scalar"))).family == "add.t"
    # a 0-dim tensor or a Python scalar does not make it mixed (it takes the tensor's dtype)
    assert op_cost("aten::mul", rec(([5184, 4], BF), ([], "float"))).family == "mul.s"
    # a bool mask or integer index is not a floating dtype
    assert op_cost("aten::where", rec(([8, 4], "bool"), ([8, 4], BF), ([8, 4], BF))).family == "where.t"
    assert op_cost("aten::add", rec(([8, 4], BF), ([4], "float"))).family == "add.b.mixed"


def test_bandwidth_ops():
    ln = op_cost(
        "aten::native_layer_norm",
        rec(
            ([4, 128, 512], BF),
            ([], "ScalarList", [], "[512]"),
            ([512], BF),
            ([512], BF),
            ([], "Scalar", [], "1e-5"),
        ),
    )
    assert ln.family == "layer_norm" and ln.features == (512, 512) and ln.flops == 7 * 4 * 128 * 512
    sm = op_cost(
        "aten::_softmax", rec(([4, 8, 128, 128], BF), ([], "Scalar", [], "-1"), ([], "Scalar", [], "False"))
    )
    assert sm.family == "softmax" and sm.bytes == 2 * 2 * 4 * 8 * 128 * 128
    add = op_cost("aten::add", rec(([128, 768, 14, 14], BF), ([1, 768, 1, 1], BF), ([], "Scalar", [], "1")))
    assert add.family == "add.b" and add.flops == 128 * 768 * 14 * 14
    assert add.bytes == 2 * (2 * 128 * 768 * 14 * 14 + 768)
    gelu = op_cost("aten::gelu", rec(([8, 3072], BF), ([], "", [], "'tanh'")))
    assert gelu.family == "gelu_tanh.s"
    mean = op_cost(
        "aten::mean", rec(([1, 8, 768], BF), ([], "ScalarList", [], "[1]"), ([], "Scalar", [], "True"))
    )
    assert mean.family == "mean.r" and mean.features == (768, 8) and mean.bytes == 2 * (8 * 768 + 768)
    emb = op_cost("aten::embedding", rec(([30522, 512], BF), ([1, 141], "long int")))
    assert emb.flops == 0 and emb.bytes == 141 * 8 + 2 * 141 * 512 * 2 and emb.features == (141, 512)
    to = op_cost("aten::_to_copy", rec(([10, 10], "float"), ([], "Scalar", [], "15")))
    assert to.bytes == 100 * 4 + 100 * 2
    copy = op_cost("aten::copy_", rec(([10, 10], BF), ([10, 10], "float"), ([], "Scalar", [], "False")))
    assert copy.bytes == 100 * 4 + 100 * 2 and copy.family == "copy.cc"
    assert op_cost("aten::view", rec(([10, 10], BF), ([], "ScalarList"))).bytes == 0
    assert op_cost("aten::topk", rec(([10, 10], BF))) is None
    assert op_cost("aten::mm", {}) is None


def test_tensor_lists():
    cat = op_cost(
        "aten::cat",
        {
            "Input Dims": [[[128, 1, 768], [128, 196, 768]], []],
            "Input type": ["TensorList", "Scalar"],
            "Concrete Inputs": ["", "1"],
        },
        list_dtype="bf16",
    )
    assert cat.bytes == 2 * 2 * 128 * 197 * 768 and cat.family == "cat.c"
    unknown = op_cost("aten::cat", {"Input Dims": [[[4], [4]], []], "Input type": ["TensorList", "Scalar"]})
    assert unknown.bytes == 2 * 8 * 4 and "not recorded" in unknown.assumed
    fe = op_cost(
        "aten::_foreach_copy_",
        {"Input Dims": [[[32]] * 4, [[32]] * 4, []], "Input type": ["TensorList", "TensorList", "Scalar"]},
        list_dtype="fp32",
    )
    assert fe.bytes == 2 * 4 * 32 * 4  # source read, destination written, not read


def test_keys():
    args = rec(([64, 32], BF), ([32, 16], BF), ([], "Scalar"))
    assert shapes_key(args) == "(64, 32), (32, 16)" and dtype_key(args) == "bf16"
    assert dtype_key(rec(([4], "long int"), ([4], "float"))) == "fp32"


@given(st.integers(1, 64), st.integers(1, 64), st.integers(1, 64), st.integers(1, 64), st.integers(2, 5))
def test_flops_linear_in_batch_and_bytes_cover_output(b, m, n, k, factor):
    one = op_cost("aten::bmm", rec(([b, m, k], BF), ([b, k, n], BF)))
    more = op_cost("aten::bmm", rec(([b * factor, m, k], BF), ([b * factor, k, n], BF)))
    assert more.flops == factor * one.flops == factor * 2 * b * m * n * k
    assert one.bytes >= 2 * b * m * n
    sdpa1 = _sdpa("aten::_scaled_dot_product_flash_attention", b, 2, m, n, 8, False)
    sdpa2 = _sdpa("aten::_scaled_dot_product_flash_attention", b * factor, 2, m, n, 8, False)
    assert sdpa2.flops == factor * sdpa1.flops and sdpa1.bytes >= 2 * b * 2 * m * 8


@given(st.lists(st.integers(1, 9), min_size=1, max_size=4), st.booleans())
def test_pointwise_bytes_at_least_output(shape, broadcast):
    other = [1] * len(shape) if broadcast else shape
    c = op_cost("aten::mul", rec((shape, BF), (other, BF)))
    n = 1
    for s in shape:
        n *= s
    assert c.flops == n and c.bytes >= 2 * n


def test_same_flops_as_profile():
    torch = pytest.importorskip("torch")
    fl = pytest.importorskip("infer_opt.profilers.flops")
    op_families = pytest.importorskip("infer_opt.profilers.op_families")
    aten = torch.ops.aten
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    assert (
        op_cost("aten::mm", rec(([64, 32], "float"), ([32, 16], "float"))).flops
        == fl.op_flops(aten.mm.default, (a, b), {}, a @ b)[0]
    )
    x, y = torch.randn(4, 8, 16), torch.randn(4, 16, 8)
    assert (
        op_cost("aten::bmm", rec(([4, 8, 16], "float"), ([4, 16, 8], "float"))).flops
        == fl.op_flops(aten.bmm.default, (x, y), {}, x @ y)[0]
    )
    x, w = torch.randn(3, 5, 16), torch.randn(24, 16)
    out = torch.nn.functional.linear(x, w)
    assert (
        op_cost("aten::linear", rec(([3, 5, 16], "float"), ([24, 16], "float"), ([], ""))).flops
        == fl.op_flops(aten.linear.default, (x, w), {}, out)[0]
    )
    q = torch.randn(2, 4, 32, 8)
    assert _sdpa("aten::_scaled_dot_product_flash_attention", 2, 4, 32, 32, 8, False).flops == fl.sdpa_flops(
        q, q, q
    )
    img, ker = torch.randn(2, 3, 20, 20), torch.randn(6, 3, 3, 3)
    conv_out = torch.nn.functional.conv2d(img, ker, stride=2, padding=1)
    args = rec(
        ([2, 3, 20, 20], "float"),
        ([6, 3, 3, 3], "float"),
        ([], ""),
        ([], "ScalarList", [], "[2, 2]"),
        ([], "ScalarList", [], "[1, 1]"),
        ([], "ScalarList", [], "[1, 1]"),
        ([], "Scalar", [], "False"),
        ([], "ScalarList", [], "[0, 0]"),
        ([], "Scalar", [], "1"),
    )
    expected = fl.op_flops(
        aten.convolution.default, (img, ker, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1), {}, conv_out
    )[0]
    assert op_cost("aten::convolution", args).flops == expected
    # predict's recorder keys the call as a trace calibration does
    family, features, _ = op_families.family_of(
        aten.convolution.default, (img, ker, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1), {}, conv_out
    )
    assert features == op_cost("aten::convolution", args).features == (200, 6, 27, 1)
    assert family == "conv2d"
    # and a pointwise op of two floating dtypes as mixed, as the trace does
    a16, a32 = torch.randn(5184, 4, dtype=torch.bfloat16), torch.randn(5184, 4)
    family, _, _ = op_families.family_of(aten.add_.Tensor, (a16, a32), {}, a16)
    assert family == op_cost("aten::add_", rec(([5184, 4], BF), ([5184, 4], "float"))).family == "add.t.mixed"
    assert op_families.family_of(aten.add.Tensor, (a16, a16), {}, a16 + a16)[0] == "add.t"
