"""Summaries of timing samples: medians and high percentiles, and ratios between them.

Percentiles are the standard library's (`statistics.quantiles`, inclusive
method: linear interpolation between the closest ranks), so p50 is the median.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0 < q < 100) of the samples, interpolated."""
    if not samples:
        raise ValueError("no samples")
    if not 0 < q < 100:
        raise ValueError(f"percentile must lie strictly between 0 and 100, not {q}")
    if len(samples) == 1:
        return float(samples[0])
    # 1000 cut points resolve tenths of a percent (p99.9 is cut point 999).
    cuts = statistics.quantiles(samples, n=1000, method="inclusive")
    # Interpolation in floating point may overshoot the largest sample by an ulp.
    return min(max(cuts[round(q * 10) - 1], min(samples)), max(samples))


@dataclass(frozen=True, slots=True)
class Distribution:
    """A set of samples (milliseconds, say) as the report shows it."""

    count: int
    median: float
    p95: float
    p99: float
    minimum: float
    maximum: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Distribution:
        if not samples:
            raise ValueError("no samples")
        return cls(
            count=len(samples),
            median=float(statistics.median(samples)),
            p95=percentile(samples, 95),
            p99=percentile(samples, 99),
            minimum=float(min(samples)),
            maximum=float(max(samples)),
        )


def ratio(measured: float, reference: float) -> float | None:
    """measured / reference, or None when the reference is zero (nothing to compare)."""
    if reference == 0:
        return None
    return measured / reference


def rate(count: int, seconds: float) -> float:
    """Items per second; zero when no time passed."""
    return count / seconds if seconds > 0 else 0.0
