"""Issue 33 class 8: the Python API refuses what the CLI refuses, naming the parameter."""

from __future__ import annotations

import pytest

import infer_opt
from infer_opt.errors import InvalidInput

BAD = [
    ("profile", {"batch": 0}, "batch"),
    ("profile", {"batch": -1}, "batch"),
    ("profile", {"batch": "2"}, "batch"),
    ("profile", {"batch": 1.5}, "batch"),
    ("profile", {"batch": True}, "batch"),
    ("profile", {"seq_len": 0}, "seq_len"),
    ("profile", {"context": 0}, "context"),
    ("profile", {"new_tokens": 0}, "new_tokens"),
    ("profile", {"reps": 0}, "reps"),
    ("profile", {"warmup": -1}, "warmup"),
    ("profile", {"reps": 1 << 40}, "reps"),
    ("kernels", {"reps": 0}, "reps"),
    ("kernels", {"reps": "many"}, "reps"),
    ("kernels", {"warmup": -1}, "warmup"),
    ("amortize_buckets", {"path": "/dev/zero"}, "path"),
]


@pytest.mark.parametrize(("name", "kwargs", "param"), BAD)
def test_bad_api_input_raises_invalid_input_naming_the_parameter(name, kwargs, param):
    with pytest.raises(InvalidInput) as caught:
        getattr(infer_opt, name)(**kwargs)
    assert caught.value.option == param
