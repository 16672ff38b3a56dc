"""The kernel-name classifier and the kernel table (``result.kernels``, family coverage)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.trace.analyze import analyze
from infer_opt.trace.kernel_names import FAMILIES, kernel_family
from tests.trace.gpu_traces import add, mm, write_trace

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"

#: real-looking names (from CUDA and ROCm traces of vLLM, SGLang, torch eager and compiled runs)
NAMES = [
    # GEMMs: cuBLAS/cuBLASLt, CUTLASS, nvjet, hipBLASLt/Tensile, Triton, magma
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute", "matmul"),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "matmul"),
    ("volta_sgemm_128x64_nn", "matmul"),
    (
        "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>(Params)",
        "matmul",
    ),
    ("nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", "matmul"),
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT32x32x256_MI16x16x1_SN_LDSB1_AFC1", "matmul"),
    ("bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1", "matmul"),
    ("matmul_kernel", "matmul"),
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false>(float)", "matmul"),
    ("triton_tem_fused_addmm_0", "matmul"),
    # attention
    (
        "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>",
        "attention",
    ),
    (
        "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<64, 64, 256, 4>, true>(Params)",
        "attention",
    ),
    (
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4>>",
        "attention",
    ),
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<true, 4u, 8u>(flashinfer::paged_kv_t)", "attention"),
    ("void vllm::paged_attention_v2_kernel<__nv_bfloat16, __nv_bfloat16, 128, 16, 128>(float*)", "attention"),
    (
        "void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16, (vllm::Fp8KVCacheDataType)0>(int)",
        "attention",
    ),
    ("kernel_unified_attention_2d", "attention"),
    ("_fwd_kernel", "attention"),
    ("fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext", "attention"),
    ("_ZN7ck_tile6kentryILi2ENS_38FmhaBatchPrefillWithPagedKVCacheKernelINS_40BlockFmha", "attention"),
    ("void flash_mla::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64>>", "attention"),
    # norms, rotary, activations
    ("void vllm::rms_norm_kernel<c10::BFloat16, 8, 2>(c10::BFloat16*, c10::BFloat16 const*, long)", "norm"),
    ("_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb1ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4", "norm"),
    (
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float)",
        "norm",
    ),
    ("triton_red_fused_add_mean_mul_pow_rsqrt_0", "norm"),
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*)", "rotary"),
    (
        "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>(float)",
        "activation",
    ),
    (
        "_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3",
        "activation",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TI)>",
        "activation",
    ),
    ("triton_poi_fused__unsafe_view_mul_silu_2", "activation"),
    # MoE, collectives, sampling, KV cache, quantization
    ("fused_moe_kernel", "moe"),
    ("void vllm::moe::topkGatingSoftmax<8, 8, 4, 16>(float const*, bool const*, float*, int)", "moe"),
    ("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu", "moe"),
    ("void moe::dev::routing::routingIndicesHistogramKernel<moe::dev::routing::KernelParams>(Params)", "moe"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication"),
    (
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals)",
        "communication",
    ),
    (
        "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*)",
        "communication",
    ),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>>>",
        "sampling",
    ),
    ("void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u, 1u>(float*)", "sampling"),
    (
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, uint8_t, (vllm::Fp8KVCacheDataType)1>",
        "kv_cache",
    ),
    ("void (anonymous namespace)::store_kvcache<2048l, 4, false, long>(StoreKVCacheParams)", "kv_cache"),
    ("void vllm::scaled_fp8_quant_kernel_strided<c10::BFloat16, c10::Float8_e4m3fn>(float)", "quantize"),
    # copies, plain elementwise, reductions, convolutions
    ("Memcpy HtoD (Pageable -> Device)", "copy"),
    ("Memset (Device)", "memset"),
    (
        "void at::native::elementwise_kernel<128, 4, gpu_kernel_impl_nocast<direct_copy_kernel_cuda>>",
        "copy",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, array<char*, 1>>",
        "elementwise",
    ),
    ("triton_poi_fused_constant_pad_nd_moe_forward_0", "elementwise"),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float>>>",
        "reduction",
    ),
    (
        "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>(float*)",
        "softmax",
    ),
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16", "conv"),
    ("cudnn_infer_volta_scudnn_128x64_relu_small_nn_v1", "conv"),
    (
        "void at::native::(anonymous namespace)::upsample_nearest1d_out_frame<c10::BFloat16>(float)",
        "elementwise",
    ),
    # nothing to go on: no family
    ("triton__0d1d2d3d", None),
    ("compute_position_kernel", None),
    ("", None),
]


@pytest.mark.parametrize(("name", "family"), NAMES, ids=[n[:40] or "empty" for n, _ in NAMES])
def test_real_kernel_names_get_their_family(name, family):
    assert kernel_family(name) == family


@given(st.one_of(st.text(max_size=300), st.none(), st.integers(), st.binary(max_size=20)))
def test_classification_never_raises_and_names_a_known_family_or_none(name):
    found = kernel_family(name)
    assert found is None or found in FAMILIES


@given(st.text(max_size=60))
def test_a_template_argument_never_makes_an_attention_kernel_something_else(suffix):
    assert kernel_family(f"void vllm::paged_attention_v1_kernel<{suffix}>(int)") == "attention"


def _kernels_fixture(tmp_path: Path) -> Path:
    # one linear (a formula: family from the op) and one add per step
    return write_trace(tmp_path / "t.json", [mm(64, 128, 256, 30.0), add(4096, 10.0)])


def test_kernel_rows_sum_to_the_gpu_time_and_say_where_the_family_came_from(tmp_path):
    r = analyze([_kernels_fixture(tmp_path)]).result
    assert r.kernels
    gpu_s = math.fsum(c.time_s for c in r.coverage)
    assert math.fsum(k.time_s for k in r.kernels) == pytest.approx(gpu_s)
    assert math.fsum(k.fraction for k in r.kernels) == pytest.approx(1.0)
    by_name = {k.name: k for k in r.kernels}
    gemm = next(k for k in r.kernels if k.family == "matmul")
    assert gemm.family_source == "op" and gemm.calls == 1 and gemm.time_s == pytest.approx(30e-6)
    assert all(k.family_source in ("op", "name") if k.family else k.family_source is None for k in r.kernels)
    assert len(by_name) == len(r.kernels)
    assert math.fsum(c.fraction for c in r.family_coverage) == pytest.approx(1.0)


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/traces absent")
@pytest.mark.parametrize(
    "name",
    [
        "tracelens__inference__vllm_decode_full__graph_execution.json.gz",
        "tracelens__b200__eager_trace.json.gz",
    ],
)
def test_graph_replays_and_engine_traces_get_a_family_for_nearly_all_gpu_time(name):
    r = analyze([TRACES / name]).result
    known = math.fsum(c.fraction for c in r.family_coverage if c.reason != "none")
    assert known >= 0.95
