"""How long a poison row waits: one interval first, doubling per failure, capped."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slot_expiration.quarantine import PoisonBackoff
from tests.support.cycles import default_backoff

bases = st.floats(min_value=0.001, max_value=86_400, allow_nan=False)


def test_the_defaults_wait_one_interval_then_double_up_to_an_hour() -> None:
    backoff = default_backoff()  # the options model's defaults

    waits = [backoff.delay(attempts).total_seconds() for attempts in range(1, 8)]

    assert waits == [300, 600, 1_200, 2_400, 3_600, 3_600, 3_600]


@given(base=bases, factor=st.floats(min_value=1, max_value=1_000), attempts=st.integers(1, 10**6))
def test_a_wait_is_never_shorter_than_the_base_nor_longer_than_the_maximum(
    base: float, factor: float, attempts: int
) -> None:
    backoff = PoisonBackoff(base_seconds=base, max_seconds=base * factor)

    wait = backoff.delay(attempts)

    assert timedelta(seconds=base) <= wait <= timedelta(seconds=base * factor)


@given(base=bases, factor=st.floats(min_value=1, max_value=1_000), attempts=st.integers(1, 200))
def test_each_failure_waits_at_least_as_long_as_the_one_before(
    base: float, factor: float, attempts: int
) -> None:
    backoff = PoisonBackoff(base_seconds=base, max_seconds=base * factor)

    assert backoff.delay(attempts + 1) >= backoff.delay(attempts)


@pytest.mark.parametrize(("base", "maximum"), [(0, 10), (-1, 10), (20, 10)])
def test_a_backoff_needs_a_positive_base_no_larger_than_its_maximum(
    base: float, maximum: float
) -> None:
    with pytest.raises(ValueError, match="base_seconds"):
        PoisonBackoff(base_seconds=base, max_seconds=maximum)


def test_attempts_count_failures_from_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        default_backoff().delay(0)
