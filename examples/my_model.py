"""A worked example of profiling your own model with ``infer-opt profile``.

Run it::

    infer-opt profile examples/my_model.py:make_model
    infer-opt profile examples/my_model.py:make_model --batch 8 --seq-len 256 --by module

The contract
============

``MODEL`` is ``path/to/file.py:FACTORY`` or ``package.module:FACTORY`` (an importable module).
infer-opt imports the file or module and calls ``FACTORY``:

* **Arguments.** infer-opt passes, by keyword, those of ``batch_size`` (int, ``--batch``),
  ``seq_len`` (int, ``--seq-len``), ``device`` (``torch.device``, ``--device``) and ``dtype``
  (``torch.dtype``, ``--dtype``) that the factory's signature names — all four when it takes
  ``**kwargs``, none when it names none of them. A factory that does not take ``device`` gets its
  model moved with ``model.to(device)`` and its tensor inputs moved too; one that does not take
  ``dtype`` gets the model cast with ``model.to(dtype)`` and its floating-point inputs cast
  (integer inputs such as token ids are left alone).
* **Return value.** ``(model, example_inputs)``:

  - ``model``: a ``torch.nn.Module`` (infer-opt calls ``.eval()`` on it) or any callable;
  - ``example_inputs``: a tensor (called as ``model(x)``), a tuple or list (``model(*inputs)``)
    or a dict of keyword arguments (``model(**inputs)``).

* **What is profiled.** One step is one call of the model on ``example_inputs`` under
  ``torch.no_grad()`` (``--mode prefill``; decode and generate need a built-in model). The call
  must do the same work every time: it is repeated for warm-up, timing and the operator pass.
* **Throughput.** Tokens/s is shown when the first positional input (or ``input_ids``) is a 2-D
  integer tensor, read as (batch, sequence).
* **Errors.** A file or module that cannot be imported, a missing factory or a wrong return value
  is bad input: a one-line ``Error:`` and exit code 2. An exception raised inside the factory or
  the model is a run-time failure: a one-line message and exit code 1 (``--debug`` shows the
  traceback).

The model here is a small text classifier: token embedding, two pre-norm transformer blocks
(attention through ``scaled_dot_product_attention``, a GELU MLP), mean pooling and a linear head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    """Pre-norm transformer block without a causal mask (an encoder)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, length, 3, self.heads, dim // self.heads).unbind(2)
        attn = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, length, dim))
        return x + self.mlp(self.norm2(x))


class TextClassifier(nn.Module):
    def __init__(
        self, vocab: int = 2000, dim: int = 128, heads: int = 4, layers: int = 2, classes: int = 10
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.head = nn.Linear(dim, classes)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(input_ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean(dim=1))


def make_model(
    batch_size: int = 4,
    seq_len: int = 128,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """A 2-layer text classifier and a batch of random token ids (keyword ``input_ids``)."""
    torch.manual_seed(0)
    model = TextClassifier().to(device=device, dtype=dtype)
    input_ids = torch.randint(0, 2000, (batch_size, seq_len), device=device)
    return model, {"input_ids": input_ids}
