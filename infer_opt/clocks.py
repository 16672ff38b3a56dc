"""How timed samples were taken, by name: the clock modes of
:func:`infer_opt.profilers.timing.measure` and the one token a result or a calibration records.
Torch-free, so views and run keys read it without loading the timer."""

from __future__ import annotations

#: on CUDA the warm-up lasts at least this long unless ``warmup_time_s`` is given (do_bench's 25 ms)
CUDA_MIN_WARMUP_S = 0.025

MODE_CPU = "cpu-clock"
MODE_EVENTS = "cuda-events"
MODE_GRAPH = "cuda-graph"


def timing_name(mode: str, flushed: bool) -> str:
    """How samples were taken, as one token: the clock mode, ``-flushed`` when the caches
    were flushed before each sample (``cuda-graph-flushed``, ``cpu-clock``). A roofline
    fit records it so ``profile`` can refuse a fit timed unlike its operators."""
    return f"{mode}-flushed" if flushed else mode
