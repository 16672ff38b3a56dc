"""Datasheet peaks of the GPUs people run inference on, and which one a trace ran on.

Peaks are **dense** (no structured sparsity) tensor-core / matrix-core rates per precision and
HBM bandwidth, from the vendor's datasheet or whitepaper named in each device's ``source``. AMD
MI250/MI250X are listed per GCD (one GCD is one device to torch and to a trace): half the
package figures. :func:`identify` reads a trace's ``deviceProperties`` (the name first; with an
empty name, the CU/SM count, warp size, memory, compute capability and kernel-name hints, and
only when they single out one device); :func:`by_name` resolves ``--device``;
:func:`precision_of` says which peak an op runs against (dtype *and* kernel name: an fp32
matmul on an A100 runs as TF32 or FP32 and only the kernel name tells). Pure: no torch.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice

T = 1e12
GB = 1e9
GIB = 1024**3

PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")
#: a precision a device lacks runs at the next one it has (bf16 on a V100 is emulated in fp32)
_FALLBACK = {"tf32": "fp32", "fp8": "fp16", "int8": "fp16", "bf16": "fp32", "fp16": "fp32", "fp64": "fp32"}

_UNVERIFIED = "; not checked against the datasheet text in this session"
_H100_CHECK = (
    "; checked (search, 2026-12): the datasheet table (sparse, 'specifications 1/2 lower without sparsity')"
)
_H100_CHECK += (
    " mirrored at archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html; dense table at glennklockwood.com"
)
_A100_CHECK = (
    "; checked (search, 2026-12): glennklockwood.com/garden/processors/A100 citing the A100 datasheet"
)
_A100_CHECK += " (nvidia-a100-datasheet-us-nvidia-1758950-r4) and the Ampere whitepaper"
_MI300X_CHECK = (
    "; 5.3 TB/s, 192 GB, 304 CUs checked (search, 2026-12: rocm.docs.amd.com MI300 microarchitecture,"
)
_MI300X_CHECK += " codesota.com); the per-precision rates not checked in this session"
_MI325X_CHECK = "; checked (search, 2026-12): 256 GB, 6 TB/s, 1307.4 bf16 / 2614.9 fp8 / 653.7 tf32 /"
_MI325X_CHECK += " 163.4 fp32 TFLOP/s dense (awesomeagents.ai, wiaix.com, aiwiki.ai quoting AMD)"
_A10G_CHECK = "; checked (search, 2026-12): 24 GB GDDR6, 600 GB/s (baseten.co); tensor figures not"
_A10G_CHECK += " checked against AWS text in this session"
_H20_CHECK = "; checked (search, 2026-12): 96 GB, 4.0 TB/s, 148 fp16 / 74 tf32 / 44 fp32 / 1 fp64"
_H20_CHECK += " TFLOP/s, 296 int8, 78 SMs (willitrunai.com, zangshuxian.com citing Geekbench 6)"
_B300_CHECK = "; checked (search, 2026-12): glennklockwood.com/garden/processors/B300 citing the HGX B300"
_B300_CHECK += " datasheet (fp64 1.25, fp32 75, tf32 1125, bf16 2250, fp8 4500 dense; 288 GB, 8 TB/s);"
_B300_CHECK += " the SM count (160) from a third-party article, not checked"


@dataclass(frozen=True)
class DeviceSpec:
    """One GPU model's datasheet roofline."""

    name: str  # canonical, e.g. "H100 SXM"
    vendor: str  # nvidia / amd
    match: tuple[str, ...]  # regexes (case-insensitive) on deviceProperties' name
    peak_flops_per_s: dict[str, float]  # dense, by precision
    bytes_per_s: float  # HBM / GDDR bandwidth
    memory_bytes: float
    num_sms: int  # SMs (NVIDIA) or CUs (AMD)
    warp_size: int
    compute_capability: tuple[int, int] | None
    source: str
    aliases: tuple[str, ...] = ()

    def peak(self, precision: str) -> float:
        """The dense peak for ``precision``, or the rate it falls back to on this device."""
        seen = precision
        while seen not in self.peak_flops_per_s:
            if seen not in _FALLBACK:
                return self.peak_flops_per_s.get("fp32", 0.0)
            seen = _FALLBACK[seen]
        return self.peak_flops_per_s[seen]


def _nv(name, match, flops, bw, mem, sms, cc, source, aliases=()):
    return DeviceSpec(name, "nvidia", match, flops, bw, mem, sms, 32, cc, source, aliases)


def _amd(name, match, flops, bw, mem, cus, source, aliases=()):
    return DeviceSpec(name, "amd", match, flops, bw, mem, cus, 64, None, source, aliases)


def _rates(fp64, fp32, tf32, half, fp8=None, int8=None) -> dict[str, float]:
    out = {"fp64": fp64 * T, "fp32": fp32 * T}
    if tf32:
        out["tf32"] = tf32 * T
    if half:
        out["bf16"] = half * T
        out["fp16"] = half * T
    if fp8:
        out["fp8"] = fp8 * T
    if int8:
        out["int8"] = int8 * T
    return out


DEVICES: tuple[DeviceSpec, ...] = (
    _nv(
        "H100 SXM",
        (r"H100.*(SXM|HBM3\b)", r"H100 80GB HBM3"),
        _rates(66.9, 66.9, 494.7, 989.4, 1978.9, 1978.9),
        3.35e12,
        80 * GIB,
        132,
        (9, 0),
        "NVIDIA H100 Tensor Core GPU datasheet (2023), SXM column, sparse figures halved; "
        "fp64 = FP64 Tensor Core" + _H100_CHECK,
        ("h100", "h100-sxm", "h100-sxm5", "h100-80gb"),
    ),
    _nv(
        "H100 PCIe",
        (r"H100.*PCIe",),
        _rates(51.2, 51.2, 378.0, 756.5, 1513.0, 1513.0),
        2.0e12,
        80 * GIB,
        114,
        (9, 0),
        "NVIDIA H100 Tensor Core GPU datasheet (2023), PCIe column, sparse figures halved" + _H100_CHECK,
        ("h100-pcie",),
    ),
    _nv(
        "H200",
        (r"(?<!G)H200",),
        _rates(66.9, 66.9, 494.7, 989.4, 1978.9, 1978.9),
        4.8e12,
        141 * GIB,
        132,
        (9, 0),
        "NVIDIA H200 Tensor Core GPU datasheet (2024), SXM column, sparse figures halved" + _UNVERIFIED,
        ("h200-sxm", "h200-141gb"),
    ),
    _nv(
        "B200",
        (r"B200",),
        _rates(37.0, 75.0, 1125.0, 2250.0, 4500.0, 4500.0),
        8.0e12,
        180 * GIB,
        148,
        (10, 0),
        "NVIDIA HGX B200 datasheet (2024): 8-GPU system figures / 8, sparse halved" + _UNVERIFIED,
        ("b200-sxm",),
    ),
    _nv(
        "A100 40GB",
        (r"A100.*40GB", r"A100-PG509", r"A100-SXM4-40GB", r"A100-PCIE-40GB"),
        _rates(19.5, 19.5, 156.0, 312.0, None, 624.0),
        1.555e12,
        40 * GIB,
        108,
        (8, 0),
        "NVIDIA A100 Tensor Core GPU datasheet (2021), 40GB column, sparse figures halved; "
        "fp64 = FP64 Tensor Core" + _A100_CHECK,
        ("a100-40gb", "a100-sxm4-40gb"),
    ),
    _nv(
        "A100 80GB SXM",
        (r"A100.*80GB",),
        _rates(19.5, 19.5, 156.0, 312.0, None, 624.0),
        2.039e12,
        80 * GIB,
        108,
        (8, 0),
        "NVIDIA A100 Tensor Core GPU datasheet (2021), 80GB SXM column, sparse figures halved" + _A100_CHECK,
        ("a100", "a100-80gb", "a100-sxm4-80gb", "a100-sxm"),
    ),
    _nv(
        "A10",
        (r"\bA10\b(?!0)",),
        _rates(0.975, 31.2, 62.5, 125.0, None, 250.0),
        600e9,
        24 * GIB,
        72,
        (8, 6),
        "NVIDIA A10 Tensor Core GPU datasheet (2021), sparse figures halved; fp64 = 1/32 of fp32 (GA102)"
        + _UNVERIFIED,
        ("a10-24gb",),
    ),
    _nv(
        "L4",
        (r"\bL4\b",),
        _rates(0.473, 30.3, 60.0, 121.0, 242.5, 242.5),
        300e9,
        24 * GIB,
        58,
        (8, 9),
        "NVIDIA L4 Tensor Core GPU datasheet (2023), sparse figures halved; fp64 = 1/64 of fp32 (AD104)"
        + _UNVERIFIED,
        ("l4-24gb",),
    ),
    _nv(
        "L40S",
        (r"L40S",),
        _rates(1.43, 91.6, 183.0, 362.05, 733.0, 733.0),
        864e9,
        48 * GIB,
        142,
        (8, 9),
        "NVIDIA L40S GPU datasheet (2023), sparse figures halved; fp64 = 1/64 of fp32 (AD102)" + _UNVERIFIED,
        ("l40s-48gb",),
    ),
    _nv(
        "V100 SXM2 16GB",
        (r"V100.*SXM2.*16GB",),
        _rates(7.8, 15.7, None, None) | {"fp16": 125e12},
        900e9,
        16 * GIB,
        80,
        (7, 0),
        "NVIDIA Tesla V100 datasheet (2020), SXM2 column; fp16 = Tensor Core (no bf16/tf32: run as fp32)"
        + _UNVERIFIED,
        ("v100-16gb", "v100-sxm2-16gb"),
    ),
    _nv(
        "V100 SXM2 32GB",
        (r"V100.*SXM2.*32GB", r"V100-SXM2(?!.*16GB)"),
        _rates(7.8, 15.7, None, None) | {"fp16": 125e12},
        900e9,
        32 * GIB,
        80,
        (7, 0),
        "NVIDIA Tesla V100 datasheet (2020), SXM2 column; fp16 = Tensor Core (no bf16/tf32: run as fp32)"
        + _UNVERIFIED,
        ("v100", "v100-32gb", "v100-sxm2-32gb", "v100-sxm2"),
    ),
    _amd(
        "MI210",
        (r"MI210",),
        _rates(45.3, 45.3, None, 181.0, None, 181.0),
        1.6384e12,
        64 * GIB,
        104,
        "AMD Instinct MI210 datasheet (2022): fp64/fp32 = matrix core; bf16/fp16/int8 dense" + _UNVERIFIED,
        ("mi-210",),
    ),
    _amd(
        "MI250 (1 GCD)",
        (r"MI250(?!X)",),
        _rates(45.25, 45.25, None, 181.05, None, 181.05),
        1.6384e12,
        64 * GIB,
        104,
        "AMD Instinct MI250 datasheet (2021), package figures / 2 (one of its 2 GCDs is one device)"
        + _UNVERIFIED,
        ("mi250", "mi-250"),
    ),
    _amd(
        "MI250X (1 GCD)",
        (r"MI250X",),
        _rates(47.85, 47.85, None, 191.5, None, 191.5),
        1.6384e12,
        64 * GIB,
        110,
        "AMD Instinct MI250X datasheet (2021), package figures / 2 (one of its 2 GCDs is one device)"
        + _UNVERIFIED,
        ("mi250x", "mi-250x"),
    ),
    _amd(
        "MI300X",
        (r"MI300X",),
        _rates(163.4, 163.4, 653.7, 1307.4, 2614.9, 2614.9),
        5.3e12,
        192 * GIB,
        304,
        "AMD Instinct MI300X datasheet (2023): fp64/fp32 = matrix; dense (sparsity off); "
        "'MI300X VF' (a virtual "
        "function, SR-IOV) is the same chip" + _MI300X_CHECK,
        ("mi300x", "mi300x-vf", "mi300"),
    ),
    _amd(
        "MI355X",
        (r"MI355X",),
        _rates(78.6, 157.3, None, 2516.6, 5033.2, 5033.2),
        8.0e12,
        288 * GIB,
        256,
        "AMD Instinct MI355X datasheet (2025): dense; no TF32 (CDNA 4)" + _UNVERIFIED,
        ("mi355x", "mi355"),
    ),
    _amd(
        "MI325X",
        (r"MI325X",),
        _rates(163.4, 163.4, 653.7, 1307.4, 2614.9, 2614.9),
        6.0e12,
        256 * GIB,
        304,
        "AMD Instinct MI325X datasheet (2024): the MI300X's CDNA 3 compute (304 CUs, same dense rates), "
        "256 GB HBM3E at 6 TB/s" + _MI325X_CHECK,
        ("mi325x", "mi325"),
    ),
)

#: the GPUs inference is served on beyond the flagship parts (issue 41): datacentre inference
#: cards, workstation and consumer boards, the export and superchip variants
MORE_DEVICES: tuple[DeviceSpec, ...] = (
    _nv(
        "T4",
        (r"\bT4\b",),
        _rates(0.254, 8.1, None, None) | {"fp16": 65e12, "int8": 130e12},
        320e9,
        16 * GIB,
        40,
        (7, 5),
        "NVIDIA T4 Tensor Core GPU datasheet (2019): fp16 = mixed-precision Tensor Core; no bf16/tf32 "
        "(Turing: run as fp32); fp64 = 1/32 of fp32" + _UNVERIFIED,
        ("t4", "tesla-t4"),
    ),
    _nv(
        "A10G",
        (r"A10G",),
        _rates(0.98, 31.5, 35.0, 70.0, None, 140.0),
        600e9,
        24 * GIB,
        80,
        (8, 6),
        "AWS EC2 G5 (A10G) figures as tabulated by baseten.co 'NVIDIA A10 vs A10G' (no NVIDIA datasheet "
        "is published): 600 GB/s, 24 GB; tensor dense" + _A10G_CHECK,
        ("a10g", "a10g-24gb"),
    ),
    _nv(
        "RTX A6000",
        (r"RTX A6000",),
        _rates(1.21, 38.7, 77.4, 154.8, None, 309.7),
        768e9,
        48 * GIB,
        84,
        (8, 6),
        "NVIDIA RTX A6000 datasheet (2020/2022): tensor 309.7 TFLOPS sparse, halved; fp64 = 1/32 of fp32"
        + _UNVERIFIED,
        ("a6000", "rtx-a6000"),
    ),
    _nv(
        "RTX 4090",
        (r"RTX 4090",),
        _rates(1.29, 82.6, 82.6, 165.2, 330.3, 660.6),
        1008e9,
        24 * GIB,
        128,
        (8, 9),
        "NVIDIA Ada Lovelace architecture whitepaper (2022), GeForce RTX 4090: dense tensor rates with FP32 "
        "accumulate (what torch matmuls use); fp64 = 1/64 of fp32" + _UNVERIFIED,
        ("4090", "rtx-4090", "geforce-rtx-4090"),
    ),
    _nv(
        "RTX 3090",
        (r"RTX 3090(?! ?Ti)",),
        _rates(0.556, 35.6, 35.6, 71.0, None, 284.0),
        936e9,
        24 * GIB,
        82,
        (8, 6),
        "NVIDIA Ampere GA102 whitepaper (2020), GeForce RTX 3090: dense tensor rates with FP32 "
        "accumulate; fp64 = 1/64 of fp32" + _UNVERIFIED,
        ("3090", "rtx-3090", "geforce-rtx-3090"),
    ),
    _nv(
        "RTX 2080 Ti",
        (r"2080 ?Ti",),
        _rates(0.42, 13.4, None, None) | {"fp16": 53.8e12, "int8": 215.2e12},
        616e9,
        11 * GIB,
        68,
        (7, 5),
        "NVIDIA Turing architecture whitepaper (2018), GeForce RTX 2080 Ti Founders Edition: fp16 = Tensor "
        "Core with FP32 accumulate; no bf16/tf32 (run as fp32)" + _UNVERIFIED,
        ("2080ti", "rtx-2080-ti", "geforce-rtx-2080-ti"),
    ),
    _nv(
        "H20",
        (r"\bH20\b",),
        _rates(1.0, 44.0, 74.0, 148.0, 296.0, 296.0),
        4.0e12,
        96 * GIB,
        78,
        (9, 0),
        "NVIDIA HGX H20 product brief (2024): 96 GB HBM3, 4.0 TB/s, dense rates; 78 SMs as reported by "
        "Geekbench listings" + _H20_CHECK,
        ("h20", "h20-96gb"),
    ),
    _nv(
        "H100 NVL",
        (r"H100.*NVL",),
        _rates(60.0, 60.0, 417.5, 835.5, 1670.5, 1670.5),
        3.9e12,
        94 * GIB,
        132,
        (9, 0),
        "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 NVL column (one GPU of the pair), sparse "
        "figures halved; fp64 = FP64 Tensor Core" + _UNVERIFIED,
        ("h100-nvl", "h100nvl"),
    ),
    _nv(
        "GH200 96GB",
        (r"GH200",),
        _rates(67.0, 67.0, 494.5, 989.5, 1979.0, 1979.0),
        4.0e12,
        96 * GIB,
        132,
        (9, 0),
        "NVIDIA GH200 Grace Hopper Superchip datasheet (2023), 96 GB HBM3 version, sparse figures "
        "halved; host link NVLink-C2C (450 GB/s each way)" + _UNVERIFIED,
        ("gh200", "gh200-96gb"),
    ),
    _nv(
        "GH200 144GB",
        (r"GH200",),
        _rates(67.0, 67.0, 494.5, 989.5, 1979.0, 1979.0),
        4.9e12,
        144 * GIB,
        132,
        (9, 0),
        "NVIDIA GH200 Grace Hopper Superchip datasheet (2024), 144 GB HBM3e version, sparse figures "
        "halved; host link NVLink-C2C (450 GB/s each way)" + _UNVERIFIED,
        ("gh200-144gb",),
    ),
    _nv(
        "B300",
        (r"B300",),
        _rates(1.25, 75.0, 1125.0, 2250.0, 4500.0, 4500.0),
        8.0e12,
        288 * GIB,
        160,
        (10, 3),
        "NVIDIA HGX B300 datasheet (2025), per GPU, dense (tensor-core fp64 cut to 1.25 TFLOP/s)"
        + _B300_CHECK,
        ("b300", "b300-sxm", "blackwell-ultra"),
    ),
)
DEVICES = DEVICES + MORE_DEVICES


#: each GPU's host link (PCIe generation, x16), from the same datasheets: what a host↔device copy
#: crosses (the HBM figure says nothing of it)
PCIE_GEN = {
    "H100 SXM": 5, "H100 PCIe": 5, "H200": 5, "B200": 5, "A100 40GB": 4, "A100 80GB SXM": 4,
    "A10": 4, "L4": 4, "L40S": 4, "V100 SXM2 16GB": 3, "V100 SXM2 32GB": 3, "MI210": 4,
    "MI250 (1 GCD)": 4, "MI250X (1 GCD)": 4, "MI300X": 5, "MI355X": 5,
    "MI325X": 5, "T4": 3, "A10G": 4, "RTX A6000": 4, "RTX 4090": 4, "RTX 3090": 4, "RTX 2080 Ti": 3,
    "H20": 5, "H100 NVL": 5, "B300": 6,
}  # fmt: skip
#: a host link that is not PCIe, one direction in bytes/s (GH200's NVLink-C2C: 900 GB/s both ways)
HOST_LINK_BYTES_PER_S = {"GH200 96GB": 450e9, "GH200 144GB": 450e9}
#: one direction of a x16 link after line coding (128b/130b), bytes/s
PCIE_X16_BYTES_PER_S = {3: 15.75e9, 4: 31.5e9, 5: 63.0e9, 6: 121.0e9}
#: the generation assumed for a device the table does not know
DEFAULT_PCIE_GEN = 4


def host_link_bytes_per_s(spec: DeviceSpec) -> float:
    """One direction of the device's x16 host link (:data:`PCIE_GEN`; PCIe
    :data:`DEFAULT_PCIE_GEN` for a device the table does not know; :data:`HOST_LINK_BYTES_PER_S`
    for a host link that is not PCIe)."""
    if spec.name in HOST_LINK_BYTES_PER_S:
        return HOST_LINK_BYTES_PER_S[spec.name]
    return PCIE_X16_BYTES_PER_S[PCIE_GEN.get(spec.name, DEFAULT_PCIE_GEN)]


def _key(text: str) -> str:
    return re.sub(r"[\s_\-()]+", "", text.lower())


def by_name(name: str) -> DeviceSpec:
    """The device ``--device NAME`` names (case, spaces, dashes ignored; aliases such as
    ``h100``, ``mi300x``, ``a100-80gb``)."""
    wanted = _key(name)
    for spec in DEVICES:
        if wanted in {_key(spec.name), *(_key(a) for a in spec.aliases)}:
            return spec
    for spec in DEVICES:  # a deviceProperties name given as --device
        if name.strip() and any(re.search(p, name, re.IGNORECASE) for p in spec.match):
            return spec
    raise InvalidInput("--device", name, "one of: " + ", ".join(s.name for s in DEVICES))


# ---------------------------------------------------------------------------- identification

#: memory within this fraction of a device's capacity counts as a match (drivers reserve some)
MEMORY_TOLERANCE = 0.12
#: kernel-name hints: (regex, vendor, compute capability or None)
_KERNEL_HINTS = (
    (r"sm_?100|sm100", "nvidia", (10, 0)),
    (r"sm_?90|sm90|nvjet", "nvidia", (9, 0)),
    (r"sm_?89|sm89", "nvidia", (8, 9)),
    (r"sm_?86|sm86", "nvidia", (8, 6)),
    (r"sm_?80|sm80|ampere_", "nvidia", (8, 0)),
    (r"sm_?70|sm70|volta_", "nvidia", (7, 0)),
    (r"cutlass|cublas|xmma|nccl", "nvidia", None),
    (r"^Cijk_|hipblaslt|rocblas|\brccl|ck_tile|gfx9", "amd", None),
)


def _int(value: object) -> int | None:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def _hints(
    kernel_names: Iterable[str], limit: int = 5000
) -> tuple[set[str], set[tuple[int, int]], list[str]]:
    vendors: set[str] = set()
    ccs: set[tuple[int, int]] = set()
    seen: list[str] = []
    for i, name in enumerate(kernel_names):
        if i >= limit:
            break
        for pattern, vendor, cc in _KERNEL_HINTS:
            if re.search(pattern, name, re.IGNORECASE):
                vendors.add(vendor)
                if cc is not None:
                    ccs.add(cc)
                hint = f"{pattern.split('|')[0].strip('^')} in kernel names"
                if hint not in seen:
                    seen.append(hint)
    return vendors, ccs, seen


def _by_properties(
    props: Mapping, vendors: set[str], ccs: set[tuple[int, int]]
) -> tuple[list[DeviceSpec], list[str]]:
    """The devices consistent with every property present (and the evidence used)."""
    candidates = list(DEVICES)
    evidence: list[str] = []
    warp = _int(props.get("warpSize"))
    if warp in (32, 64):
        candidates = [d for d in candidates if d.warp_size == warp]
        evidence.append(f"warpSize {warp}")
    elif len(vendors) == 1:
        candidates = [d for d in candidates if d.vendor in vendors]
    sms = _int(props.get("numSms", props.get("multiProcessorCount")))
    if sms:
        candidates = [d for d in candidates if d.num_sms == sms]
        evidence.append(f"{sms} {'CUs' if warp == 64 else 'SMs'}")
    memory = _int(props.get("totalGlobalMem"))
    if memory:
        candidates = [
            d for d in candidates if abs(memory - d.memory_bytes) <= MEMORY_TOLERANCE * d.memory_bytes
        ]
        evidence.append(f"{memory / GIB:.1f} GiB")
    major, minor = _int(props.get("computeMajor")), _int(props.get("computeMinor"))
    nvidia_cc = (major, minor) if major is not None and minor is not None and warp != 64 else None
    if nvidia_cc is not None:
        candidates = [d for d in candidates if d.compute_capability in (None, nvidia_cc)]
        evidence.append(f"compute capability {major}.{minor}")
    if len(ccs) == 1 and nvidia_cc is None:
        candidates = [d for d in candidates if d.compute_capability in (None, *ccs)]
    return candidates, evidence


def _by_name_match(name: str, memory: int | None) -> list[DeviceSpec]:
    found = [d for d in DEVICES if any(re.search(p, name, re.IGNORECASE) for p in d.match)]
    if len(found) > 1 and memory:
        near = [d for d in found if abs(memory - d.memory_bytes) <= MEMORY_TOLERANCE * d.memory_bytes]
        found = near or found
    return found


#: older spellings of a device table's fields (``cudaDeviceProp`` / ``torch.cuda`` style) and the
#: Kineto names they stand for
PROPERTY_ALIASES = {
    "major": "computeMajor",
    "minor": "computeMinor",
    "multiProcessorCount": "numSms",
    "multi_processor_count": "numSms",
    "total_memory": "totalGlobalMem",
    "totalMemory": "totalGlobalMem",
}


def normalized_properties(props: Mapping) -> dict:
    """One device's table with older field names (:data:`PROPERTY_ALIASES`) as Kineto's; a field
    under both names keeps the Kineto one."""
    out = dict(props)
    for old, new in PROPERTY_ALIASES.items():
        if old in props and new not in props:
            out[new] = props[old]
    return out


def ran_on(properties: Sequence[Mapping], device_ids: Iterable[int]) -> tuple[Mapping, ...]:
    """A device table that lists every GPU of the host (as older traces do), its entry for the
    device the kernels ran on first: the ``id`` most of ``device_ids`` (the GPU events' device
    column) name. The table as it is when no entry's ``id`` is one of them."""
    counts: dict[int, int] = {}
    for d in device_ids:
        counts[int(d)] = counts.get(int(d), 0) + 1
    by_id = {}
    for i, p in enumerate(properties):
        if isinstance(p, Mapping):
            key = p.get("id", p.get("device_id"))
            try:
                by_id.setdefault(int(key), i)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                continue
    ranked = sorted((c, d) for d, c in counts.items() if d in by_id)
    if not ranked:
        return tuple(properties)
    first = by_id[ranked[-1][1]]
    return (properties[first], *(p for i, p in enumerate(properties) if i != first))


def identify(
    properties: Sequence[Mapping], kernel_names: Iterable[str] = ()
) -> tuple[DeviceSpec | None, str, tuple[Notice, ...]]:
    """``(device, device_source, notices)`` for a trace's ``deviceProperties``: the name when it
    names one device (``"deviceProperties"``); else the properties and kernel names when they
    single one out (``"inferred"``, notice ``device_inferred`` with the evidence); else
    ``(None, "unknown", device_unknown)``. Never a guess. The first entry is the device read
    (:func:`ran_on` puts the kernels' one first); older field names are read too
    (:func:`normalized_properties`)."""
    props: Mapping = normalized_properties(next((p for p in properties if isinstance(p, Mapping)), {}))
    name = str(props.get("name") or "").strip()
    memory = _int(props.get("totalGlobalMem"))
    if name:
        found = _by_name_match(name, memory)
        if len(found) == 1:
            return found[0], "deviceProperties", ()
    vendors, ccs, hint_words = _hints(kernel_names)
    candidates, evidence = _by_properties(props, vendors, ccs) if props else ([], [])
    if not props and len(vendors) == 1:
        candidates = [
            d for d in DEVICES if d.vendor in vendors and (len(ccs) != 1 or d.compute_capability in ccs)
        ]
    evidence += hint_words
    if len(candidates) == 1 and (props or hint_words):
        values = {"device": candidates[0].name, "name": name, "evidence": tuple(evidence)}
        return candidates[0], "inferred", (Notice("device_inferred", values),)
    seen = tuple(([f"name {name!r}"] if name else ["no device name"]) + evidence)
    values = {"seen": seen, "candidates": tuple(d.name for d in candidates[:6])}
    return None, "unknown", (Notice("device_unknown", values),)


# ---------------------------------------------------------------------------- precision

_DTYPES = (
    (r"float8|fp8|e4m3|e5m2", "fp8"),
    (r"bfloat16|^bf16$", "bf16"),
    (r"half|float16|^fp16$", "fp16"),
    (r"^double$|float64|^fp64$", "fp64"),
    (r"^float$|float32|^fp32$|^single$", "fp32"),
    (r"^long( long)?( int)?$|int64|^long$", "int64"),
    (r"^int$|int32", "int32"),
    (r"^short( int)?$|int16", "int16"),
    (r"^signed char$|^int8|^char$", "int8"),
    (r"unsigned char|uint8|^byte$", "uint8"),
    (r"^bool$", "bool"),
    (r"complex<float>|complexfloat", "complex64"),
    (r"complex<double>|complexdouble", "complex128"),
)
#: bytes per element of each short dtype
DTYPE_BYTES = {
    "fp8": 1, "bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "int64": 8, "int32": 4, "int16": 2,
    "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16,
}  # fmt: skip
_TF32_KERNEL = re.compile(r"tf32|s1688|s16816|tensorop_s|xmma.*tf32|xf32", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)  # pure; called for every argument of every op (half a rank's time)
def normalize_dtype(text: str) -> str:
    """A trace's dtype spelling (``c10::BFloat16``, ``float``, ``long int``, ``Float8_e4m3fn``,
    ``torch.float16`` ...) as a short name (``bf16``, ``fp32``, ``int64``, ``fp8`` ...); ``""`` for
    an empty one, the lower-cased text for one not known."""
    t = text.strip().removeprefix("c10::").removeprefix("torch.").strip().lower()
    if not t:
        return ""
    for pattern, short in _DTYPES:
        if re.search(pattern, t):
            return short
    return t


def precision_of(dtype: str, kernel_names: Sequence[str] = (), device: DeviceSpec | None = None) -> str:
    """The peak an op runs against: its dtype, except an fp32 op whose kernel is a TF32 one
    (``tf32``, ``s1688``, ``tensorop_s``/``xmma_..._tf32``; only Ampere and later, and a device
    without TF32 keeps fp32)."""
    short = normalize_dtype(dtype)
    tf32_ok = device is None or "tf32" in device.peak_flops_per_s
    if short in ("fp32", "") and tf32_ok and any(_TF32_KERNEL.search(k) for k in kernel_names):
        return "tf32"
    if short in ("int64", "int32", "int16", "uint8", "bool"):
        return "int8" if short == "uint8" else "fp32"
    return short if short in PRECISIONS else "fp32"
