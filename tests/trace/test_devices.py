"""Device table, identification from deviceProperties, precision from dtype and kernel name."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from infer_opt.errors import InvalidInput
from infer_opt.trace import devices as dv

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"

REQUIRED = ["H100 SXM", "H100 PCIe", "H200", "B200", "A100 40GB", "A100 80GB SXM", "A10", "L4", "L40S"]
REQUIRED += [
    "V100 SXM2 16GB",
    "V100 SXM2 32GB",
    "MI210",
    "MI250 (1 GCD)",
    "MI250X (1 GCD)",
    "MI300X",
    "MI355X",
]


def test_table_has_the_required_devices_with_sources():
    names = {d.name for d in dv.DEVICES}
    assert set(REQUIRED) <= names
    for d in dv.DEVICES:
        assert d.source and d.bytes_per_s > 0 and d.num_sms > 0
        assert set(d.peak_flops_per_s) <= set(dv.PRECISIONS)
        assert d.warp_size == (32 if d.vendor == "nvidia" else 64)


def test_datasheet_figures():
    h100 = dv.by_name("H100 SXM")
    assert h100.peak_flops_per_s["bf16"] == pytest.approx(989.4e12)
    assert h100.peak_flops_per_s["tf32"] == pytest.approx(494.7e12)
    assert h100.peak_flops_per_s["fp32"] == pytest.approx(66.9e12)
    assert h100.bytes_per_s == pytest.approx(3.35e12)
    a100 = dv.by_name("a100-40gb")
    assert (a100.peak("bf16"), a100.peak("tf32"), a100.peak("fp32")) == (312e12, 156e12, 19.5e12)
    assert a100.bytes_per_s == pytest.approx(1.555e12)
    assert dv.by_name("A100 80GB SXM").bytes_per_s == pytest.approx(2.039e12)
    mi300 = dv.by_name("mi300x")
    assert mi300.peak("bf16") == pytest.approx(1307.4e12) and mi300.peak("fp32") == pytest.approx(163.4e12)
    assert mi300.bytes_per_s == pytest.approx(5.3e12)
    # a precision the device lacks falls back: bf16 on a V100 runs at its fp32 rate
    assert dv.by_name("v100").peak("bf16") == dv.by_name("v100").peak("fp32")


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("h100", "H100 SXM"),
        ("MI300X", "MI300X"),
        ("a100-80gb", "A100 80GB SXM"),
        (" H100 pcie ", "H100 PCIe"),
    ],
)
def test_by_name_aliases(text, name):
    assert dv.by_name(text).name == name


def test_by_name_unknown_lists_the_choices():
    with pytest.raises(InvalidInput, match="one of: H100 SXM"):
        dv.by_name("tpu-v5")


def _props(name, sms, warp, mem, major=9, minor=0):
    return [{"name": name, "numSms": sms, "warpSize": warp, "totalGlobalMem": mem, "computeMajor": major,
             "computeMinor": minor}]  # fmt: skip


def test_identify_by_name_and_vf():
    spec, source, notes = dv.identify(_props("AMD Instinct MI300X VF", 304, 64, 205571227648))
    assert (spec.name, source, notes) == ("MI300X", "deviceProperties", ())
    spec, source, _ = dv.identify(_props("NVIDIA A100-PG509-200", 108, 32, 42297524224, 8, 0))
    assert (spec.name, source) == ("A100 40GB", "deviceProperties")


def test_identify_empty_name_304_cus_is_inferred_and_said():
    spec, source, notes = dv.identify(_props("", 304, 64, 206141652992), ["Cijk_Alik_Bljk_BBS_BH"])
    assert (spec.name, source) == ("MI300X", "inferred")
    assert notes[0].code == "device_inferred" and "304 CUs" in notes[0]["evidence"]


def test_identify_ambiguous_is_none():
    # 104 CUs and 64 GiB: an MI210 or one GCD of an MI250 -- the name 'AMD Radeon Graphics' says neither
    spec, source, notes = dv.identify(_props("AMD Radeon Graphics", 104, 64, 68702699520))
    assert (spec, source) == (None, "unknown")
    assert notes[0].code == "device_unknown" and set(notes[0]["candidates"]) == {"MI210", "MI250 (1 GCD)"}
    assert dv.identify([])[0:2] == (None, "unknown")
    assert dv.identify([], ["cutlass_80_tensorop_s1688gemm"])[0] is None  # a vendor is not a device


def test_precision_from_dtype_and_kernel():
    a100 = dv.by_name("a100-40gb")
    assert dv.precision_of("float", ["ampere_sgemm_128x64_nn"], a100) == "fp32"
    assert dv.precision_of("float", ["sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize"], a100) == "tf32"
    assert dv.precision_of("float", ["cutlass_80_tensorop_s1688gemm_128x128"], a100) == "tf32"
    assert dv.precision_of("float", ["cutlass_80_tensorop_s1688gemm"], dv.by_name("v100")) == "fp32"
    assert dv.precision_of("c10::BFloat16", ["nvjet_hsh_128x256"], None) == "bf16"
    assert dv.precision_of("c10::Half", (), None) == "fp16"
    assert dv.precision_of("Float8_e4m3fn", (), None) == "fp8"


@pytest.mark.parametrize(
    ("text", "short"),
    [("c10::BFloat16", "bf16"), ("BFloat16", "bf16"), ("float", "fp32"), ("c10::Half", "fp16"),
     ("double", "fp64"), ("long int", "int64"), ("int", "int32"),
     ("bool", "bool"), ("Float8_e4m3fn", "fp8"), ("", "")],
)  # fmt: skip
def test_normalize_dtype(text, short):
    assert dv.normalize_dtype(text) == short


EXPECTED = {
    "hta__amd_trace__mi250": None,  # 'AMD Radeon Graphics', 104 CUs: MI210 or an MI250 GCD
    "hta__critical_path": "A100 40GB",
    "hta__df_index_resolver": "V100 SXM2 32GB",
    "hta__trace_diff__test": "V100 SXM2 16GB",
    "hta__trace_diff__control": "A100 40GB",
    "tracelens__h100": "H100 SXM",
    "tracelens__mi300__": "MI300X",
    "tracelens__inference__vllm_decode_full": "MI300X",
    "tracelens__inference__sglang": "MI300X",
    "tracelens__mi210": "MI210",
}


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/traces absent")
def test_every_shared_trace_device():
    checked = 0
    for path in sorted(TRACES.glob("*.json.gz")):
        prefix = next((p for p in EXPECTED if path.name.startswith(p)), None)
        if prefix is None:
            continue
        with gzip.open(path) as f:
            data = json.load(f)
        kernels = [e["name"] for e in data["traceEvents"] if e.get("cat") in ("kernel", "Kernel")]
        spec, source, _ = dv.identify(data.get("deviceProperties", []), kernels)
        assert (spec.name if spec else None) == EXPECTED[prefix], path.name
        if "vllm_decode_full" in path.name:
            assert source == "inferred"
        checked += 1
    assert checked >= 20
