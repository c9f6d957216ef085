"""Percentiles, distributions and ratios of the benchmark's report."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest
from benchmarks.stats import Distribution, Spread, percentile, rate, ratio
from hypothesis import given
from hypothesis import strategies as st

SAMPLES = st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1)


def test_percentiles_of_one_to_a_hundred_interpolate_between_ranks() -> None:
    samples = [float(n) for n in range(1, 101)]

    assert percentile(samples, 50) == pytest.approx(50.5)
    assert percentile(samples, 95) == pytest.approx(95.05)
    assert percentile(samples, 99) == pytest.approx(99.01)


def test_percentile_of_one_sample_is_that_sample() -> None:
    assert percentile([7.5], 99) == 7.5


def test_percentile_ignores_the_order_of_the_samples() -> None:
    assert percentile([3.0, 1.0, 2.0, 10.0], 75) == percentile([1.0, 2.0, 3.0, 10.0], 75)


@pytest.mark.parametrize("q", [0, 100, -1, 150])
def test_percentile_outside_zero_to_a_hundred_is_refused(q: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 100"):
        percentile([1.0, 2.0], q)


def test_percentile_of_no_samples_is_refused() -> None:
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 50)


@given(SAMPLES)
def test_a_distribution_orders_its_figures_and_its_median_is_the_median(
    samples: list[float],
) -> None:
    summary = Distribution.of(samples)

    assert summary.count == len(samples)
    assert summary.median == pytest.approx(statistics.median(samples))
    ordered = [summary.minimum, summary.median, summary.p95, summary.p99, summary.maximum]
    # Interpolated in floating point: equal neighbours may differ in the last bit.
    assert all(a <= b or math.isclose(a, b, rel_tol=1e-12) for a, b in itertools.pairwise(ordered))


def test_a_distribution_of_no_samples_is_refused() -> None:
    with pytest.raises(ValueError, match="no samples"):
        Distribution.of([])


def test_ratio_divides_and_has_none_for_a_zero_reference() -> None:
    assert ratio(13.0, 10.0) == pytest.approx(1.3)
    assert ratio(1.0, 0.0) is None


def test_rate_is_items_per_second_and_zero_without_time() -> None:
    assert rate(200_000, 8.0) == 25_000
    assert rate(10, 0.0) == 0.0


def test_a_spread_of_rounds_gives_the_median_the_range_and_the_quartiles() -> None:
    spread = Spread.of([1.2, 0.9, 1.0, 1.5, 1.1])

    assert spread is not None
    assert spread.median == pytest.approx(1.1)
    assert (spread.minimum, spread.maximum) == (0.9, 1.5)
    assert spread.q1 == pytest.approx(1.0)
    assert spread.q3 == pytest.approx(1.2)
    assert spread.values == (1.2, 0.9, 1.0, 1.5, 1.1)
    assert spread.describe() == "1.10 (0.90-1.50 over 5 rounds)"


def test_a_spread_leaves_out_rounds_without_a_value_and_of_none_is_none() -> None:
    one = Spread.of([None, 1.25])

    assert one is not None
    assert (one.median, one.q1, one.q3, one.values) == (1.25, 1.25, 1.25, (1.25,))
    assert one.describe() == "1.25 (1 round)"
    assert Spread.of([None]) is None
    assert Spread.of([]) is None


@given(st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1))
def test_a_spread_orders_its_figures(values: list[float]) -> None:
    spread = Spread.of(values)

    assert spread is not None
    ordered = [spread.minimum, spread.q1, spread.median, spread.q3, spread.maximum]
    assert all(a <= b or math.isclose(a, b, rel_tol=1e-12) for a, b in itertools.pairwise(ordered))
