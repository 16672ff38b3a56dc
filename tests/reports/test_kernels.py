"""The kernels view: TF32 float32 runs are labelled as such, a stopped sweep says why."""

from __future__ import annotations

from dataclasses import replace

from infer_opt.messages import text
from infer_opt.notices import Notice
from infer_opt.reports.kernels import build_view
from tests.reports.fixtures import kernels


def test_float32_with_tf32_matmuls_is_labelled_tf32():
    base = kernels()
    assert base.dtype == "float32"
    tf32 = replace(base, device_info={**base.device_info, "float32_matmul_precision": "tf32"})
    view = build_view(tf32)
    assert view.title.endswith(", tf32") and dict(view.summary)["Dtype"].startswith("tf32 (float32 matmuls")
    assert not build_view(base).title.endswith("tf32")


def test_a_stopped_sweep_says_where_and_why_instead_of_interrupted():
    stopped = Notice("sweep_stopped", {"case": "matmul[n=64]", "reason": "CUDA graph capture failed: X"})
    view = build_view(replace(kernels(), complete=False, warnings=(stopped,)))
    words = [text(w) for w in view.warnings]
    assert any(w.startswith("stopped at matmul[n=64]: CUDA graph capture failed: X") for w in words)
    assert not any(w.startswith("interrupted") for w in words)
    interrupted = build_view(replace(kernels(), complete=False))
    assert any(text(w).startswith("interrupted:") for w in interrupted.warnings)
