from __future__ import annotations

import re

import pytest
import torch

from infer_opt.errors import InvalidInput, UnsupportedOnDevice
from infer_opt.profilers import device as devices


def test_cpu_and_auto():
    assert devices.resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert devices.resolve_device("auto").type == expected
    assert devices.resolve_device(torch.device("cpu")) == torch.device("cpu")


@pytest.mark.parametrize("spec", ["tpu", "cuda:x", "cuda:-1", "", "mps2"])
def test_bad_device_spec(spec):
    with pytest.raises(InvalidInput, match="--device"):
        devices.resolve_device(spec)


def test_cuda_without_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UnsupportedOnDevice, match=r"--device: CUDA is not available.*--device cpu"):
        devices.resolve_device("cuda")
    assert devices.resolve_device("auto") == torch.device("cpu")


def test_cuda_index_out_of_range(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert devices.resolve_device("cuda:0") == torch.device("cuda", 0)
    with pytest.raises(InvalidInput, match=r"\[0, 0\]"):
        devices.resolve_device("cuda:3")


@pytest.mark.parametrize(
    ("name", "dtype"),
    [("float32", torch.float32), ("fp32", torch.float32), ("bf16", torch.bfloat16), ("FP16", torch.float16)],
)
def test_dtype_aliases(name, dtype):
    assert devices.parse_dtype(name, "cpu") == dtype
    assert devices.dtype_name(dtype) == {"fp32": "float32", "bf16": "bfloat16"}.get(
        name, name.lower().replace("fp16", "float16")
    )


@pytest.mark.parametrize("name", ["float64", "int8", "fp8", ""])
def test_unknown_dtype(name):
    with pytest.raises(InvalidInput, match=r"--dtype.*float32, bfloat16, float16"):
        devices.parse_dtype(name, "cpu")


def test_dtype_that_does_not_work_on_the_device(monkeypatch):
    monkeypatch.setattr(devices, "_dtype_works", lambda device, key: key != "float16")
    with pytest.raises(InvalidInput, match=r"float16 .*not supported on cpu"):
        devices.parse_dtype("float16", "cpu")


def test_device_key_is_filesystem_safe_and_names_threads_and_dtype():
    key = devices.device_key("cpu", torch.bfloat16)
    assert re.fullmatch(r"cpu-[a-z0-9-]+-\d+t-bfloat16", key), key
    assert f"-{torch.get_num_threads()}t-" in key


def test_cache_size_parsing():
    assert devices._parse_cache_size("32768K") == 32 * 2**20
    assert devices._parse_cache_size("2M\n") == 2 * 2**20
    assert devices._parse_cache_size("512") == 512
    assert devices._parse_cache_size("big") is None


def test_flush_buffer_exceeds_llc_or_falls_back(monkeypatch):
    llc = devices.cpu_llc_bytes()
    if llc is not None:
        assert devices.flush_buffer_bytes("cpu") == 2 * llc
    monkeypatch.setattr(devices, "cpu_llc_bytes", lambda: None)
    assert devices.flush_buffer_bytes("cpu") == devices.DEFAULT_LLC_BYTES


def test_device_info_on_cpu():
    info = devices.device_info("cpu")
    assert info["kind"] == "cpu"
    assert info["threads"] == torch.get_num_threads()
    assert info["name"] == devices.cpu_model_name()
    assert "llc_bytes" in info and "torch" in info


def test_synchronize_waits_on_cuda_devices_only(monkeypatch):
    waited = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: waited.append(str(device)))
    devices.synchronize("cpu")
    devices.synchronize(torch.device("cpu"))
    assert waited == []  # the CPU has no queue to wait for: torch.cuda is never asked
    devices.synchronize("cuda:0")
    assert waited == ["cuda:0"]


@pytest.mark.gpu
def test_device_info_on_cuda():
    dev = devices.resolve_device("cuda")
    info = devices.device_info(dev)
    assert info["kind"] == "cuda" and info["memory_bytes"] > 0
    assert info["capability"]
    assert devices.flush_buffer_bytes(dev) > (info["l2_bytes"] or 0)
    assert devices.device_key(dev, torch.float32).startswith("cuda-")


def test_auto_dtype_is_float32_on_the_cpu():
    import torch

    from infer_opt.profilers.device import parse_dtype

    assert parse_dtype("auto", "cpu") is torch.float32
    assert parse_dtype(" AUTO ", "cpu") is torch.float32


@pytest.fixture
def restore_matmul_precision():
    yield
    torch.backends.cuda.matmul.fp32_precision = "none"
    torch.backends.mkldnn.matmul.fp32_precision = "none"


def test_matmul_precision_is_ieee_by_default_and_empty_for_other_dtypes():
    assert devices.matmul_precision("cpu", torch.float32) == "ieee"
    assert devices.matmul_precision("cpu", torch.bfloat16) == ""
    assert devices.device_info("cpu")["float32_matmul_precision"] == "ieee"


def test_cuda_float32_reads_the_tf32_setting(restore_matmul_precision):
    torch.backends.cuda.matmul.fp32_precision = "tf32"  # what allow_tf32 = True sets too
    assert devices.matmul_precision("cuda", torch.float32) == "tf32"
    torch.backends.cuda.matmul.fp32_precision = "none"
    assert devices.matmul_precision("cuda", torch.float32) == "ieee"


def test_the_environment_override_turns_tf32_on(monkeypatch):
    monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")
    assert devices.matmul_precision("cuda:0", "float32") == "tf32"
    assert devices.matmul_precision("cpu", "float32") == "ieee"  # cuBLAS only


def test_reduced_cpu_matmul_precision_is_in_the_device_key(restore_matmul_precision):
    plain = devices.device_key("cpu", torch.float32)
    torch.backends.mkldnn.matmul.fp32_precision = "bf16"
    assert devices.device_key("cpu", torch.float32) == plain + "-bf16"
    assert devices.device_key("cpu", torch.bfloat16).endswith("-bfloat16")  # not a float32 key
    key = devices.run_key("cpu", torch.float32, "cpu-clock")
    assert key.matmul_precision == "bf16" and key.slug() == plain + "-bf16-cpu-clock"


def test_set_threads_refuses_more_than_the_cpus_available():
    cpus = devices.available_cpus()
    before = torch.get_num_threads()
    with pytest.raises(InvalidInput, match=rf"^threads: must be an integer from 1 to {cpus}"):
        devices.set_threads(cpus + 1)
    with pytest.raises(InvalidInput):
        devices.set_threads(0)
    assert torch.get_num_threads() == before
    devices.set_threads(1)
    try:
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_bf16_support_is_asked_of_the_run_s_device(monkeypatch):
    """``torch.cuda.is_bf16_supported()`` asks the *current* device: a run on cuda:1 must
    make it current first (here cuda:1 lacks bfloat16, cuda:0 has it)."""
    from contextlib import contextmanager

    current = ["cuda:0"]

    @contextmanager
    def device(d):
        current.append(str(d))
        try:
            yield
        finally:
            current.pop()

    monkeypatch.setattr(torch.cuda, "device", device)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: current[-1] != "cuda:1")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "Old GPU")
    monkeypatch.setattr(devices, "_dtype_works", lambda device, key: True)
    assert devices.parse_dtype("bfloat16", "cuda:0") is torch.bfloat16
    with pytest.raises(InvalidInput, match="bfloat16 is not supported on Old GPU"):
        devices.parse_dtype("bfloat16", "cuda:1")
