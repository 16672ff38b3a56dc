"""The engines' custom ops (vLLM, SGLang, AITER, sgl-kernel): worked numbers from hand-made
recorded args (``Input Dims``, ``Input type``, ``Concrete Inputs``, as the reader keeps them),
invariants, and the shared capture/replay pairs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.trace.analyze import analyze
from infer_opt.trace.engine_op_costs import engine_formula
from infer_opt.trace.op_costs import op_cost
from infer_opt.trace.ops import category

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
PREFIX = "tracelens__inference__"
BF, F32, I64, I32, U8, I16 = "c10::BFloat16", "float", "long int", "int", "unsigned char", "short int"


def rec(*inputs):
    """``(dims, type[, concrete])`` per argument; no strides (contiguous), as the reader keeps them."""
    return {
        "Input Dims": [i[0] for i in inputs],
        "Input type": [i[1] for i in inputs],
        "Concrete Inputs": [i[2] if len(i) > 2 else "" for i in inputs],
    }


EPS = ([], "Scalar", "1e-06")


# --------------------------------------------------------------------------- RMSNorm


def test_rmsnorm_out_argument_aiter_sgl_vllm():
    # aiter::rmsnorm(out, input, weight, eps) of SGLang's q-norm: 1024 rows of 128
    c = op_cost("aiter::rmsnorm", rec(([1024, 128], BF), ([1024, 128], BF), ([128], BF), EPS))
    assert c.flops == 4 * 1024 * 128 == 524288
    assert c.bytes == 2 * (1024 * 128 + 1024 * 128 + 128) == 524544  # input read, out written, weight
    assert c.family == "rms_norm" and c.features == (1024, 128) and c.dtype == "bf16"
    for name in ("_C::rms_norm", "sgl_kernel::rmsnorm", "sgl_kernel::gemma_rmsnorm"):
        d = op_cost(
            name, rec(([1024, 128], BF), ([1024, 128], BF), ([128], BF), EPS, ([], "Scalar", "False"))
        )
        assert (d.flops, d.bytes, d.family) == (c.flops, c.bytes, c.family), name


def test_rmsnorm_functional_forms_write_their_output():
    # aiter::rms_norm(input, weight, eps, flag) -> out; vllm::rocm_aiter_rms_norm(x, weight, eps) -> out
    for name, args in (
        ("aiter::rms_norm", rec(([32, 2880], BF), ([2880], BF), EPS, ([], "Scalar", "0"))),
        ("aiter::rmsnorm2d_fwd", rec(([32, 2880], BF), ([2880], BF), EPS, ([], "Scalar", "0"))),
        ("vllm::rocm_aiter_rms_norm", rec(([32, 2880], BF), ([2880], BF), EPS)),
    ):
        c = op_cost(name, args)
        assert c.flops == 4 * 92160
        assert c.bytes == 2 * (92160 + 2880 + 92160) == 374400, name
        assert c.features == (32, 2880)


def test_fused_add_rmsnorm_all_forms_move_the_same_bytes():
    # input and residual read, output and new residual written, the weight read: 4·n + h elements
    n, h = 32 * 4096, 4096
    want = 2.0 * (4 * n + h)
    four = ([32, 4096], BF)
    forms = {
        "aiter::add_rmsnorm": rec(four, four, four, four, ([4096], BF), EPS),
        "aiter::rmsnorm2d_fwd_with_add_ck": rec(
            four, four, four, four, ([4096], BF), EPS, ([], "Scalar", "0")
        ),
        "vllm::rocm_aiter_rmsnorm2d_fwd_with_add": rec(four, four, ([4096], BF), EPS),
        "_C::fused_add_rms_norm": rec(four, four, ([4096], BF), EPS),
        "sgl_kernel::fused_add_rmsnorm": rec(four, four, ([4096], BF), EPS, ([], "Scalar", "False")),
    }
    for name, args in forms.items():
        c = op_cost(name, args)
        assert c.bytes == want == 1056768.0, name
        assert c.flops == 5 * n == 655360, name
        assert c.family == "rms_norm.add" and c.features == (32, 4096) and category(c.family) == "norm"


def test_aten_rms_norm_keeps_its_own_formula():
    # aten::rms_norm(input, normalized_shape, weight, eps): not an engine op
    assert engine_formula("aten::rms_norm") is None and engine_formula("aten::silu") is None
    c = op_cost("aten::rms_norm", rec(([32, 64], F32), ([], "ScalarList", "[64]"), ([64], F32), EPS))
    assert c.family == "rms_norm" and c.bytes == 4 * (32 * 64 + 64 + 32 * 64)


# --------------------------------------------------------------------------- activations


def test_silu_and_mul():
    # sgl_kernel::silu_and_mul(out [32, 12288], input [32, 24576]) of Qwen3-8B's MLP
    c = op_cost("sgl_kernel::silu_and_mul", rec(([32, 12288], BF), ([32, 24576], BF)))
    assert c.flops == 2 * 32 * 12288 == 786432
    assert c.bytes == 2 * (32 * 24576 + 32 * 12288) == 2359296
    assert c.family == "activation.silu_and_mul" and c.features == (32, 12288)
    assert category(c.family) == "activation"
    g = op_cost("_C::gelu_tanh_and_mul", rec(([4, 8], F32), ([4, 16], F32)))
    assert (g.flops, g.bytes, g.family) == (64.0, 4.0 * (64 + 32), "activation.gelu_tanh_and_mul")


def test_gated_activation_of_wrong_sizes_has_no_formula():
    assert op_cost("_C::silu_and_mul", rec(([4, 8], BF), ([4, 8], BF))) is None


# --------------------------------------------------------------------------- rotary


def test_rotary_embedding_vllm_gpt_oss():
    # _C::rotary_embedding(positions [32], query [32, 64·64], key [32, 8·64], head_size 64,
    # cos_sin_cache [131072, 64], is_neox): 72 heads of 64 rotated per token
    args = rec(([32], I64), ([32, 4096], BF), ([32, 512], BF), ([], "Scalar", "64"), ([131072, 64], BF),
               ([], "Scalar", "True"))  # fmt: skip
    c = op_cost("_C::rotary_embedding", args)
    rotated = 32 * 72 * 64
    assert c.flops == 3 * rotated == 442368
    assert c.bytes == 2 * rotated * 2 + 32 * 8 + 32 * 64 * 2 == 594176
    assert c.family == "rotary" and c.features == (32, 72, 64) and category("rotary") == "rotary"


def test_rotary_partial_rot_dim_and_no_key():
    # head_size 128, rot_dim 64 (a partial rotary): half of each head touched; key None
    args = rec(([4], I64), ([4, 2, 128], F32), ([], ""), ([], "Scalar", "128"), ([100, 64], F32),
               ([], "Scalar", "False"))  # fmt: skip
    c = op_cost("sgl_kernel::rotary_embedding", args)
    assert c.features == (4, 2, 64)
    assert c.flops == 3 * 4 * 2 * 64 and c.bytes == 2 * 512 * 4 + 4 * 8 + 4 * 64 * 4


def test_rotary_without_head_size_has_no_formula():
    args = rec(([4], I64), ([4, 256], BF), ([4, 256], BF), ([], "Scalar"), ([100, 128], BF))
    assert op_cost("_C::rotary_embedding", args) is None


# --------------------------------------------------------------------------- KV-cache stores


def test_store_cache_sglang():
    # sglang::store_cache(k [32, 1024], v, k_cache [835874, 1024], v_cache, indices [32], 2048, 0)
    args = rec(([32, 1024], BF), ([32, 1024], BF), ([835874, 1024], BF), ([835874, 1024], BF), ([32], I64),
               ([], "Scalar", "2048"), ([], "Scalar", "0"))  # fmt: skip
    c = op_cost("sglang::store_cache", args)
    assert c.flops == 0
    assert c.bytes == 2 * (32 * 1024 * 2) * 2 + 32 * 8 == 262400  # k, v read and written; slots
    assert c.family == "kv_cache" and c.features == (32, 1024) and category("kv_cache") == "kv_cache"


def test_reshape_and_cache_flash_fp8_cache_writes_one_byte():
    kv = ([32, 8, 64], BF)
    cache = ([224304, 32, 8, 64], BF)
    args = rec(kv, kv, cache, cache, ([32], I64), ([], ""), ([1], F32), ([1], F32))
    c = op_cost("_C_cache_ops::reshape_and_cache_flash", args)
    assert c.bytes == 2 * 32 * 512 * 2 * 2 + 256 == 131328
    fp8 = ([224304, 32, 8, 64], U8)
    d = op_cost("_C_cache_ops::reshape_and_cache", rec(kv, kv, fp8, fp8, ([32], I64), ([], "str", "fp8")))
    assert d.bytes == 2 * 32 * 512 * (2 + 1) + 256 == 98560


# --------------------------------------------------------------------------- inductor pointwise


def test_triton_pointwise_to_copy_and_pad():
    # triton_poi_fused__to_copy_1(in fp32 [131072, 64], out bf16 [131072, 64], xnumel)
    c = op_cost("triton_poi_fused__to_copy_1", rec(([131072, 64], F32), ([131072, 64], BF),
                                                   ([], "Scalar", "8388608")))  # fmt: skip
    assert c.flops == 8388608 and c.bytes == 8388608 * (4 + 2) == 50331648 and c.family == "triton_poi"
    assert category(c.family) == "elementwise"
    # constant_pad_nd: in [32, 2880] -> out [32, 3072], xnumel = 32·3072
    d = op_cost("triton_poi_fused_constant_pad_nd_moe_forward_0",
                rec(([32, 2880], BF), ([32, 3072], BF), ([], "Scalar", "98304")))  # fmt: skip
    assert d.bytes == 2 * (32 * 2880 + 32 * 3072) == 380928


def test_triton_pointwise_gather_counts_the_picked_elements_and_needs_its_size():
    # a [1000, 64] table read at most n elements; a 2-D kernel's ynumel·xnumel
    c = op_cost("triton_poi_fused_embedding_2", rec(([8], I64), ([1000, 64], BF), ([8, 64], BF),
                                                    ([], "Scalar", "8"), ([], "Scalar", "64")))  # fmt: skip
    assert c.flops == 512 and c.bytes == 8 * 8 + 512 * 2 + 512 * 2
    assert op_cost("triton_poi_fused_0", rec(([32], I32), ([201088, 2880], BF), ([32, 2880], BF))) is None


def test_triton_pointwise_other_integer_arguments_are_not_sizes():
    # B200's vocab-parallel mask kernel: (ids, out, mask, 0, 25136, 201088, 201088, 0, xnumel 888)
    args = rec(([888], I32), ([888], I64), ([888], "bool"), *[([], "Scalar", v) for v in
               ("0", "25136", "201088", "201088", "0", "888")])  # fmt: skip
    c = op_cost("triton_poi_fused_add_bitwise_and_bitwise_not_0", args)
    assert c.flops == 888 and c.bytes == 888 * (4 + 8 + 1)
    # trailing integers none of whose products is a buffer's size: no formula
    bad = rec(([16], F32), ([16], F32), ([], "Scalar", "100"), ([], "Scalar", "7"))
    assert op_cost("triton_poi_fused_mul_0", bad) is None


# --------------------------------------------------------------------------- no formula


@pytest.mark.parametrize(
    "name, args",
    [
        ("vllm::moe_forward", rec(([32, 3072], BF), ([32, 32], BF), ([], ""), ([], ""))),
        ("vllm::unified_attention_with_output",
         rec(([32, 64, 64], BF), ([32, 8, 64], BF), ([32, 8, 64], BF), ([32, 64, 64], BF))),
        ("SortTokens", rec(([32, 4], BF), ([32, 4], I16), ([], "Scalar", "32"))),
        ("vllm::unified_kv_cache_update", rec(([32, 8, 64], BF), ([32, 8, 64], BF), ([], ""))),
    ],
)  # fmt: skip
def test_ops_whose_work_is_not_in_the_shapes_have_no_formula(name, args):
    assert op_cost(name, args) is None


# --------------------------------------------------------------------------- invariants

dims = st.integers(1, 64)


@given(rows=dims, hidden=dims, fused=st.booleans(), esize=st.sampled_from([(BF, 2), (F32, 4)]))
def test_norm_bytes_scale_with_the_dtype_and_forms_agree(rows, hidden, fused, esize):
    t, size = esize
    x, w = ([rows, hidden], t), ([hidden], t)
    if fused:
        a = op_cost("aiter::add_rmsnorm", rec(x, x, x, x, w, EPS))
        b = op_cost("_C::fused_add_rms_norm", rec(x, x, w, EPS))
        elems = 4 * rows * hidden + hidden
    else:
        a = op_cost("aiter::rmsnorm", rec(x, x, w, EPS))
        b = op_cost("aiter::rms_norm", rec(x, w, EPS, ([], "Scalar", "0")))
        elems = 2 * rows * hidden + hidden
    assert a.bytes == b.bytes == elems * size
    assert a.flops == b.flops == (5 if fused else 4) * rows * hidden


@given(tokens=dims, hq=st.integers(1, 16), hk=st.integers(1, 16), head=st.sampled_from([64, 128]),
       part=st.sampled_from([1, 2]))  # fmt: skip
def test_rotary_counts_grow_with_heads_and_tokens(tokens, hq, hk, head, part):
    rot = head // part

    def cost(q_heads):
        return op_cost("_C::rotary_embedding", rec(([tokens], I64), ([tokens, q_heads * head], BF),
                       ([tokens, hk * head], BF), ([], "Scalar", str(head)), ([4096, rot], BF)))  # fmt: skip

    a, b = cost(hq), cost(hq + 1)
    assert b.flops - a.flops == 3 * tokens * rot
    assert b.bytes - a.bytes == 2 * 2 * tokens * rot
    assert a.flops == 3 * tokens * (hq + hk) * rot


# --------------------------------------------------------------------------- shared pairs

PAIRS = {
    "vllm_full": ("vllm_decode_full__graph_execution", "vllm_decode_full__capture_traces__"),
    "vllm_piecewise": (
        "vllm_prefilldecode_piecewise__graph_execution",
        "vllm_prefilldecode_piecewise__capture_traces__",
    ),
    "sglang": ("sglang_decode__sglang_Qwen3-8B_decode", "sglang_decode__capture_traces__"),
}


def _linked(pair):
    replay, capture = PAIRS[pair]
    reps = list(TRACES.glob(f"{PREFIX}{replay}.json.gz"))
    caps = list(TRACES.glob(f"{PREFIX}{capture}*.json.gz"))
    if not reps or not caps:
        pytest.skip("shared capture/replay pair absent")
    return analyze([reps[0]], capture=[caps[0]]).result


def _formula_share(result):
    return math.fsum(c.fraction for c in result.coverage if c.reason == "modelled")


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/traces absent")
@pytest.mark.parametrize(
    "pair, engine_ops, floor",
    [
        ("sglang", {"aiter::add_rmsnorm", "sgl_kernel::silu_and_mul", "sgl_kernel::rotary_embedding",
                    "sglang::store_cache", "aiter::rmsnorm"}, 0.75),
        ("vllm_full", {"vllm::rocm_aiter_rmsnorm2d_fwd_with_add", "_C::rotary_embedding",
                       "_C_cache_ops::reshape_and_cache_flash", "triton_poi_fused__to_copy_1"}, 0.2),
        ("vllm_piecewise", {"vllm::rocm_aiter_rmsnorm2d_fwd_with_add", "_C::rotary_embedding",
                            "_C_cache_ops::reshape_and_cache_flash"}, 0.15),
    ],
)  # fmt: skip
def test_shared_pairs_engine_ops_get_formulas_below_the_peak(pair, engine_ops, floor):
    r = _linked(pair)
    by_name = {g.name: g for g in r.ops}
    for name in engine_ops:
        g = by_name[name]
        assert g.bytes > 0 and g.bound in ("bandwidth", "launch"), name
        assert g.peak_fraction is not None and g.peak_fraction < 1.0, name  # no rate above the peak
    assert _formula_share(r) >= floor
    # what stays without a formula is the decode attention / MoE (their work is not in the shapes)
    missing = [
        g.name for g in r.ops if g.bound == "unknown" and g.time_s > 0.05 * sum(x.time_s for x in r.ops)
    ]
    assert set(missing) <= {"vllm::moe_forward", "vllm::unified_attention_with_output",
                            "sglang_profiler::attention_paged_attention_ragged_100"}  # fmt: skip


def test_calibration_names_the_engine_families_features():
    from infer_opt.trace.calibrate import feature_names

    assert feature_names("activation.silu_and_mul", 2) == ("rows", "d")
    assert feature_names("rotary", 3) == ("tokens", "heads", "rot_dim")
    assert feature_names("kv_cache", 2) == ("tokens", "row")
    assert feature_names("rms_norm.add", 2) == ("rows", "hidden")
    assert feature_names("triton_poi", 1) == ("n",)
