"""The requests of compile amortization (amortize, amortize measure):
:mod:`infer_opt.requests`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infer_opt.requests import (
    MAX_REPS,
    Bounds,
    Choice,
    Count,
    CountList,
    Duration,
    Flag,
    InputFile,
    Request,
    Resume,
    Strings,
    option,
)


@dataclass(frozen=True)
class AmortizeRequest(Request):
    """``infer-opt amortize``: one shape (seconds from Python; ``eager``/``compiled`` bare
    numbers are ms on the command line) or a bucket CSV, its calls from a length sample."""

    compile_cost: float | None = option(None, Duration("s"), positional=True)
    eager: float | None = option(None, Duration("ms"), positional=True)
    compiled: float | None = option(None, Duration("ms"), positional=True)
    calls: int | None = option(None, Count(0), positional=True)
    buckets: Path | None = option(None, InputFile(allow_stdin=True))
    lengths: Path | None = option(None, InputFile(allow_stdin=True))
    requests: int | None = option(None, Count(1))


@dataclass(frozen=True)
class AmortizeMeasureRequest(Request):
    """``infer-opt amortize measure``: compile cost and steady times per (batch, bound) bucket of
    a model, the calls per bucket given or from a length sample; ``resume`` a saved sweep."""

    model: str = option("tiny", positional=True)
    bounds: tuple[int, ...] = option((32, 64), Bounds())
    batch_sizes: tuple[int, ...] = option((1,), CountList(1, 1 << 16))
    calls_per_bucket: tuple[int, ...] | None = option(None, CountList(0))
    lengths: Path | None = option(None, InputFile(allow_stdin=True))
    requests: int | None = option(None, Count(1))
    device: str = option("auto")
    dtype: str = option("auto")
    warmup: int = option(3, Count(0, MAX_REPS))
    reps: int = option(20, Count(1, MAX_REPS))
    backend: str = option("inductor", Choice(("inductor", "eager", "aot_eager", "cudagraphs")))
    cuda_graphs: bool | None = option(None, Flag())
    resume: Any = option(None, Resume("amortize-measure", "an amortize measure result"))
    hf_config: tuple[str, ...] = option((), Strings())
