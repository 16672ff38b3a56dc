"""The one statistics summary of the project, and the checks every report shares.

Pure: stdlib and numpy only. Every timing (kernel suite, model profile, compare) is
summarised by :class:`Summary`; medians and the interquartile range (IQR) are the robust
pair reported everywhere, mean and standard deviation are kept for completeness.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infer_opt.notices import Notice

#: IQR/median above this is reported as high variance (10%).
VARIANCE_THRESHOLD = 0.10


@dataclass(frozen=True)
class Summary:
    """Order statistics of repeated timings, in seconds.

    Quartiles use linear interpolation between order statistics (numpy's default, the same
    as ``torch.quantile`` and ``statistics.quantiles(method="inclusive")``).
    ``std_s`` is the sample standard deviation (n - 1 in the denominator; 0 for one sample).
    """

    n: int
    median_s: float
    q1_s: float
    q3_s: float
    iqr_s: float
    min_s: float
    max_s: float
    mean_s: float
    std_s: float

    def loaded_problems(self) -> list[tuple[str, object, str]]:
        """Times are finite and >= 0, over at least one sample (a file read back)."""
        from infer_opt.results import number_problems

        out = number_problems(
            self, non_negative=("median_s", "q1_s", "q3_s", "iqr_s", "min_s", "max_s", "mean_s", "std_s")
        )
        return [("n", self.n, "must be an integer >= 1"), *out] if self.n < 1 else out

    @property
    def rel_iqr(self) -> float:
        """IQR / median: the relative spread (0 when the median is 0)."""
        return self.iqr_s / self.median_s if self.median_s > 0 else 0.0

    @classmethod
    def from_samples(cls, samples_s: Sequence[float]) -> Summary:
        """Summarise one or more finite, non-negative samples."""
        values = np.asarray(list(samples_s), dtype=float)
        if values.size == 0:
            raise ValueError("Summary.from_samples needs at least one sample")
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise ValueError("timing samples must be finite and >= 0")
        q1, median, q3 = np.percentile(values, [25.0, 50.0, 75.0])
        std = float(values.std(ddof=1)) if values.size > 1 else 0.0
        return cls(
            n=int(values.size),
            median_s=float(median),
            q1_s=float(q1),
            q3_s=float(q3),
            iqr_s=float(q3 - q1),
            min_s=float(values.min()),
            max_s=float(values.max()),
            mean_s=float(values.mean()),
            std_s=std,
        )


def variance_warning(summary: Summary, threshold: float = VARIANCE_THRESHOLD) -> str | None:
    """A warning with the fix when IQR/median exceeds ``threshold``, else ``None``."""
    rel = summary.rel_iqr
    if not math.isfinite(rel) or rel <= threshold:
        return None
    return f"high variance (IQR/median {100.0 * rel:.0f}%): raise --reps or --warmup, close other programs"


def variance_notice(summary: Summary, threshold: float = VARIANCE_THRESHOLD) -> Notice | None:
    """:func:`variance_warning` as data: ``Notice("high_variance", {"rel_iqr": IQR/median})``
    when IQR/median exceeds ``threshold``, else ``None``."""
    rel = summary.rel_iqr
    if not math.isfinite(rel) or rel <= threshold:
        return None
    return Notice("high_variance", {"rel_iqr": rel})
