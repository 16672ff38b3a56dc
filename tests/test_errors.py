"""Error types and the one out-of-memory detector."""

from __future__ import annotations

import numpy as np
import pytest

from infer_opt.errors import InvalidInput, out_of_memory


class OutOfMemoryError(RuntimeError):
    """Named like torch's (torch.OutOfMemoryError / torch.cuda.OutOfMemoryError)."""


@pytest.mark.parametrize(
    ("exc", "size"),
    [
        (
            OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; 79 GiB total)"),
            "20.00 GiB",
        ),
        (
            RuntimeError(
                "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried "
                "to allocate 274877906944 bytes. Error code 12 (Cannot allocate memory)"
            ),
            "256 GiB",
        ),
        (MemoryError(), ""),
        (RuntimeError("CUDA error: out of memory"), ""),
    ],
)
def test_allocation_failures_are_recognised_with_their_size(exc, size):
    assert out_of_memory(exc) == size


def test_numpys_memory_error_names_its_size():
    with pytest.raises(MemoryError) as info:
        np.empty(2**50)
    assert out_of_memory(info.value) == "8.00 PiB"


@pytest.mark.parametrize("exc", [ValueError("out of range"), RuntimeError("shape mismatch"), KeyError("x")])
def test_other_errors_are_not_out_of_memory(exc):
    assert out_of_memory(exc) is None


def test_long_values_are_cut_in_messages():
    message = str(InvalidInput("calls", "9" * 400, "must be a whole number"))
    assert len(message) < 200 and "402 characters" in message  # the repr, quotes included
