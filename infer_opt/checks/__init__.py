"""Exactness checks: does an optimization preserve what it claims to?

* :mod:`~infer_opt.checks.online_softmax` — the online-softmax state ``(m, ℓ, u)`` and its merge.
* :mod:`~infer_opt.checks.blocked_attention` — blocked (FlashAttention-style) reference attention
  in numpy float64 and in torch, with masks, against full softmax attention.
* :mod:`~infer_opt.checks.mask_alignment` — causal-mask alignment for cached decode
  (``infer-opt attention check``).
* :mod:`~infer_opt.checks.speculative_sampler` — a reference speculative sampler, its exact output
  distribution and a seeded Monte-Carlo test (``infer-opt speculative verify``).

Modules here never import torch, typer, rich, pandas or matplotlib at import time; torch
and scipy are imported inside the functions that need them.
"""
