"""One causal-attention FLOP convention in ``trace``, ``profile`` and ``predict`` (issue 41):
a call with ``is_causal=True`` counts half the dense QKᵀ and PV FLOPs; a non-causal or
explicitly masked call counts them all."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from infer_opt.profilers import models, op_recorder
from infer_opt.trace.op_costs import CAUSAL_CONVENTION, op_cost

B, H, T, D = 2, 4, 16, 8
DENSE = 4 * B * H * T * T * D


def _profiled(causal: bool) -> int:
    q = torch.randn(B, H, T, D)
    calls = op_recorder.record_ops(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=causal))
    return sum(c.flops for c in calls if c.category == "attention")


def _traced(causal: bool) -> float:
    args = {
        "Input Dims": [[B, H, T, D]] * 3 + [[], []],
        "Input type": ["float"] * 3 + ["Scalar", "Scalar"],
        "Concrete Inputs": ["", "", "", "0.", str(causal)],
    }
    return op_cost("aten::_scaled_dot_product_flash_attention_for_cpu", args).flops


@pytest.mark.parametrize(("causal", "flops"), [(True, DENSE // 2), (False, DENSE)])
def test_trace_profile_and_predict_count_causal_attention_alike(causal, flops):
    assert CAUSAL_CONVENTION == "half"
    assert _traced(causal) == flops
    assert _profiled(causal) == flops
    config = models.BUILTIN_CONFIGS["tiny"]
    one_layer = config.attention_flops(B, T, T) // config.n_layers  # prefill: is_causal
    assert one_layer == 4 * B * config.n_heads * T * T * config.head_dim // 2
    assert config.attention_flops(B, 1, T) == 4 * B * config.n_heads * T * config.head_dim * config.n_layers
