"""Which device and dtype a measurement runs on, and what that device is.

``--device auto|cpu|cuda[:N]`` and ``--dtype float32|bfloat16|float16`` are resolved here
once; every profiler and command goes through these functions so the errors read the same.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from infer_opt.errors import InvalidInput, RunFailure, UnsupportedOnDevice
from infer_opt.run_key import RunKey

#: flush buffer size when the last-level cache size cannot be read (CPU)
DEFAULT_LLC_BYTES = 64 * 2**20
#: flush buffer size when the GPU's L2 size cannot be read
DEFAULT_L2_FLUSH_BYTES = 256 * 2**20

DTYPE_ALIASES = {
    "float32": "float32",
    "fp32": "float32",
    "f32": "float32",
    "float": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "f16": "float16",
    "half": "float16",
}
DTYPE_CHOICES = "float32, bfloat16, float16"

_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(?::(\d+))?)$")


def resolve_device(spec: Any = "auto", *, option: str = "--device") -> Any:
    """``auto`` -> ``cuda`` when CUDA is available, else ``cpu``; ``cuda[:N]`` is checked
    against the devices present. Returns a ``torch.device``."""
    import torch

    if isinstance(spec, torch.device):
        spec = str(spec)
    text = str(spec).strip().lower()
    match = _DEVICE_RE.match(text)
    if not match:
        raise InvalidInput(option, spec, "expected auto, cpu, cuda or cuda:N")
    if text == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if text == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        why = "this torch build has no CUDA" if torch.version.cuda is None else "no CUDA device is visible"
        raise UnsupportedOnDevice(f"{option}: CUDA is not available ({why}); use --device cpu (got {spec!r})")
    index = int(match.group(2)) if match.group(2) is not None else torch.cuda.current_device()
    count = torch.cuda.device_count()
    if index >= count:
        raise InvalidInput(option, spec, f"CUDA device index must be in [0, {count - 1}]")
    return torch.device("cuda", index)


def is_cuda(device: Any) -> bool:
    """True for a CUDA device given as ``torch.device`` or string."""
    return str(device).startswith("cuda")


def dtype_name(dtype: Any) -> str:
    """``torch.float32`` -> ``"float32"`` (strings pass through their canonical alias)."""
    text = str(dtype).removeprefix("torch.")
    return DTYPE_ALIASES.get(text.lower(), text)


def parse_dtype(name: Any, device: Any = "cpu", *, option: str = "--dtype") -> Any:
    """``float32|bfloat16|float16`` (or fp32/bf16/fp16) -> ``torch.dtype``, checked to work on
    ``device`` with a tiny matmul and softmax. ``auto`` is bfloat16 on CUDA, float32 elsewhere."""
    import torch

    if isinstance(name, torch.dtype):
        name = dtype_name(name)
    if str(name).strip().lower() == "auto":
        name = "bfloat16" if is_cuda(device) else "float32"
    key = DTYPE_ALIASES.get(str(name).strip().lower())
    if key is None:
        raise InvalidInput(option, name, f"expected auto or one of {DTYPE_CHOICES}")
    dtype = getattr(torch, key)
    if is_cuda(device) and dtype == torch.bfloat16:
        with activate(device):  # is_bf16_supported asks the current device, which need not be this one
            supported = torch.cuda.is_bf16_supported()
        if not supported:
            raise InvalidInput(option, name, f"bfloat16 is not supported on {device_name(device)}")
    if not _dtype_works(str(device), key):
        raise InvalidInput(option, name, f"{key} matmul/softmax is not supported on {device}")
    return dtype


@functools.cache
def _dtype_works(device: str, key: str) -> bool:
    import torch

    try:
        x = torch.ones(4, 4, dtype=getattr(torch, key), device=device)
        torch.softmax(x @ x, dim=-1)
    except (RuntimeError, TypeError, NotImplementedError):
        return False
    return True


@contextlib.contextmanager
def activate(device: Any) -> Iterator[None]:
    """Make ``device`` the current CUDA device inside (a no-op on the CPU). CUDA's current
    device is per thread and defaults to ``cuda:0``: streams, graph captures, ``torch.compile``
    and device queries that take no device follow it, so a run on ``cuda:1`` sets it."""
    if not is_cuda(device):
        yield
        return
    import torch

    with torch.cuda.device(device):
        yield


def synchronize(device: Any) -> None:
    """Wait for queued work on ``device`` (a no-op on the CPU)."""
    if is_cuda(device):
        import torch

        torch.cuda.synchronize(device)


def device_name(device: Any) -> str:
    """``"NVIDIA H200"`` or the CPU model name (``"AMD EPYC"``)."""
    if is_cuda(device):
        import torch

        return torch.cuda.get_device_name(device)
    return cpu_model_name()


@functools.lru_cache(maxsize=1)
def cpu_model_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def matmul_precision(device: Any, dtype: Any) -> str:
    """What float32 matmuls on ``device`` compute in, as torch is set now: ``"tf32"`` or
    ``"bf16"`` where reduced precision is allowed, else ``"ieee"``; ``""`` for other dtypes.

    CUDA: ``torch.backends.cuda.matmul.fp32_precision`` (set by ``allow_tf32`` and by
    ``torch.set_float32_matmul_precision("high"|"medium")`` too) or the environment override
    ``TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1``. CPU: oneDNN's ``fp32_precision``."""
    if dtype_name(dtype) != "float32":
        return ""
    import torch

    if is_cuda(device) and os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE") == "1":
        return "tf32"
    backend = (
        torch.backends.cuda.matmul if is_cuda(device) else getattr(torch.backends.mkldnn, "matmul", None)
    )
    try:
        value = getattr(backend, "fp32_precision", None)
        if value is None and is_cuda(device):  # torch before the fp32_precision API
            value = "tf32" if torch.backends.cuda.matmul.allow_tf32 else "ieee"
    except RuntimeError:  # torch refuses to read a mix of the legacy and the new API
        value = "tf32"
    return value if value in ("tf32", "bf16") else "ieee"


def run_key(device: Any, dtype: Any, timing: str = "") -> RunKey:
    """The :class:`RunKey` of a run on ``device`` in ``dtype`` as torch is set now (threads,
    matmul precision), timed as ``timing``."""
    import torch

    return RunKey(
        device_kind="cuda" if is_cuda(device) else "cpu",
        device_name=device_name(device),
        dtype=dtype_name(dtype),
        threads=None if is_cuda(device) else torch.get_num_threads(),
        matmul_precision=matmul_precision(device, dtype),
        timing=timing,
    )


def device_key(device: Any, dtype: Any) -> str:
    """A filesystem-safe key per device model and dtype, e.g. ``cuda-nvidia-h200-bfloat16``.

    On the CPU the thread count is part of the key (``cpu-amd-epyc-2t-float32``): the
    compute rate scales with it, so a fit made with other threads is not reused. A float32
    key names a reduced matmul precision (``cuda-nvidia-h200-float32-tf32``)."""
    return run_key(device, dtype).device_slug()


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def set_threads(threads: int) -> None:
    """``torch.set_num_threads(threads)``, refusing more threads than :func:`available_cpus`:
    extra threads only wait for a core (and would key a roofline fit no run can reuse)."""
    import torch

    cpus = available_cpus()
    if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= cpus:
        raise InvalidInput("threads", threads, f"must be an integer from 1 to {cpus} (the CPUs available)")
    torch.set_num_threads(threads)


def _parse_cache_size(text: str) -> int | None:
    match = re.match(r"^\s*(\d+)\s*([KMG]?)", text.strip(), re.IGNORECASE)
    if not match:
        return None
    scale = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2).upper()]
    return int(match.group(1)) * scale


#: where the CPU's caches are described (one core's: cpu0)
CACHE_SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")


def cpu_caches() -> dict[tuple[int, str], int]:
    """``(level, type) -> bytes`` of one core's caches from sysfs (type ``Data``, ``Instruction``
    or ``Unified``); empty when sysfs does not tell."""
    out = {}
    try:
        for index in sorted(CACHE_SYSFS.glob("index*")):
            size = _parse_cache_size((index / "size").read_text())
            if size:
                level = int((index / "level").read_text().strip())
                out[(level, (index / "type").read_text().strip())] = size
    except (OSError, ValueError):
        return {}
    return out


@functools.lru_cache(maxsize=1)
def cpu_llc_bytes() -> int | None:
    """Size of the last-level cache from sysfs (highest level, data or unified), else from
    ``sysconf``; ``None`` when neither tells."""
    levels = [(level, size) for (level, kind), size in cpu_caches().items() if kind in ("Data", "Unified")]
    if levels:
        return max(levels)[1]
    for name in ("SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE"):
        try:
            size = os.sysconf(name)
        except (ValueError, OSError):
            continue
        if size and size > 0:
            return int(size)
    return None


def gpu_l2_bytes(device: Any) -> int | None:
    """The GPU's L2 size from ``torch.cuda.get_device_properties`` where torch exposes it."""
    import torch

    props = torch.cuda.get_device_properties(device)
    size = getattr(props, "L2_cache_size", None)
    return int(size) if size else None


def flush_buffer_bytes(device: Any) -> int:
    """Bytes to write between repetitions to evict the inputs: twice the L2 (GPU) or the
    last-level cache (CPU), with fallbacks of 256 MiB (GPU) and 64 MiB (CPU)."""
    if is_cuda(device):
        l2 = gpu_l2_bytes(device)
        return 2 * l2 if l2 else DEFAULT_L2_FLUSH_BYTES
    llc = cpu_llc_bytes()
    return 2 * llc if llc else DEFAULT_LLC_BYTES


def device_info(device: Any) -> dict[str, Any]:
    """What the measurement ran on: name, kind, threads, CUDA/driver, cache and memory."""
    import torch

    info: dict[str, Any] = {
        "name": device_name(device),
        "kind": "cuda" if is_cuda(device) else "cpu",
        "device": str(device),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "float32_matmul_precision": matmul_precision(device, "float32"),
    }
    if is_cuda(device):
        props = torch.cuda.get_device_properties(device)
        info.update(
            cuda=torch.version.cuda,
            capability=f"{props.major}.{props.minor}",
            multiprocessors=getattr(props, "multi_processor_count", None),
            memory_bytes=int(props.total_memory),
            l2_bytes=gpu_l2_bytes(device),
        )
        driver = getattr(torch._C, "_cuda_getDriverVersion", None)
        if driver is not None:
            with contextlib.suppress(RuntimeError):
                info["driver"] = int(driver())
    else:
        info.update(
            cpu_count=os.cpu_count(),
            llc_bytes=cpu_llc_bytes(),
            machine=platform.machine(),
        )
        try:
            pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
            info["memory_bytes"] = int(pages * page_size)
        except (ValueError, OSError):
            pass
    return info


# ---------------------------------------------------------------------------- memory


def free_memory_bytes(device: Any) -> int | None:
    """Memory free for new tensors on ``device``: CUDA's free memory, else the host's
    ``MemAvailable`` (None when it cannot be read)."""
    if is_cuda(device):
        import torch

        return int(torch.cuda.mem_get_info(device)[0])
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    return None


#: refuse a working set above this share of the free memory (the rest is for everything else)
MEMORY_HEADROOM = 0.9


def ensure_fits(n_bytes: float, device: Any, what: str, hint: str) -> None:
    """A :class:`RunFailure` (exit 1) naming ``what`` and its size when ``n_bytes`` would not fit
    in the free memory of ``device``: asking first beats the allocator's failure (or, on Linux,
    the kernel killing the process when the pages are touched)."""
    from infer_opt.units import format_bytes

    free = free_memory_bytes(device)
    if free is not None and n_bytes > MEMORY_HEADROOM * free:
        raise RunFailure(
            f"out of memory: {what} needs about {format_bytes(n_bytes)} and {device} has "
            f"{format_bytes(free)} free; nothing was measured. {hint}"
        )
