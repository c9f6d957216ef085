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


@dataclass(frozen=True, slots=True)
class Spread:
    """A figure measured once per round: its median over the rounds, and how far it ranged.

    The quartiles are the standard library's (inclusive method); with fewer than two
    values they are the value itself.
    """

    median: float
    minimum: float
    maximum: float
    q1: float
    q3: float
    values: tuple[float, ...]  # each round's, in the order the rounds ran

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Spread | None:
        """The spread of the rounds' values, leaving out those that could not be computed
        (None: a zero reference); None if none could."""
        kept = [float(v) for v in values if v is not None]
        if not kept:
            return None
        q1, q3 = (
            statistics.quantiles(kept, n=4, method="inclusive")[::2]
            if len(kept) > 1
            else (kept[0], kept[0])
        )
        return cls(
            median=float(statistics.median(kept)),
            minimum=min(kept),
            maximum=max(kept),
            q1=q1,
            q3=q3,
            values=tuple(kept),
        )

    def describe(self) -> str:
        """`1.05 (0.98-1.12 over 5 rounds)`, or `1.05 (1 round)`."""
        rounds = len(self.values)
        if rounds == 1:
            return f"{self.median:.2f} (1 round)"
        return f"{self.median:.2f} ({self.minimum:.2f}-{self.maximum:.2f} over {rounds} rounds)"
