"""Fixed-rate ticks on an injected monotonic clock: no drift, no burst, no real sleeping."""

from __future__ import annotations

import asyncio
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slot_expiration.loop.ticker import IntervalTicker, next_tick_after, wait_or_stop


class FakeClock:
    """A monotonic clock that only moves when the test (or the fake sleep) moves it."""

    def __init__(self, start: float) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, stop: asyncio.Event, delay_seconds: float) -> None:
        """Like wait_or_stop: returns at once when stopped, else 'sleeps' by moving the clock."""
        self.sleeps.append(delay_seconds)
        if stop.is_set():
            return
        self.now += max(delay_seconds, 0.0)
        await asyncio.sleep(0)


async def _tick_times(
    ticker: IntervalTicker,
    clock: FakeClock,
    count: int,
    work_seconds: float = 0.0,
) -> list[float]:
    """The clock reading at each of the first `count` ticks; each tick 'works' work_seconds."""
    stop = asyncio.Event()
    seen: list[float] = []
    async for _ in ticker.ticks(stop):
        seen.append(clock.now)
        if len(seen) == count:
            stop.set()
        clock.now += work_seconds
    return seen


# -- next_tick_after ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (100.0, 110.0),  # at the first tick: the next one
        (103.0, 110.0),
        (109.5, 110.0),
        (110.0, 120.0),  # exactly on a tick: the one after it
        (117.0, 120.0),
    ],
)
def test_next_tick_after_is_the_next_point_of_the_fixed_grid(now: float, expected: float) -> None:
    assert next_tick_after(100.0, 10.0, now) == expected


def test_next_tick_after_a_late_wake_up_skips_the_missed_ticks_instead_of_bursting() -> None:
    # Woken at 135 after ticking at 100: 110, 120 and 130 are gone; the next tick is 140.
    assert next_tick_after(100.0, 10.0, 135.0) == 140.0


def test_next_tick_after_a_clock_reading_before_the_first_tick_is_one_interval_after_it() -> None:
    assert next_tick_after(100.0, 10.0, 90.0) == 110.0


@given(
    first=st.integers(min_value=0, max_value=10**6),
    interval=st.integers(min_value=1, max_value=10**4),
    elapsed=st.integers(min_value=0, max_value=10**8),
)
def test_next_tick_after_is_on_the_grid_after_now_and_at_most_one_interval_away(
    first: int, interval: int, elapsed: int
) -> None:
    # Whole numbers keep the float arithmetic exact: this states the grid contract itself.
    now = float(first + elapsed)

    tick = next_tick_after(float(first), float(interval), now)

    assert now < tick <= now + interval
    assert (tick - first) % interval == 0


def test_next_tick_after_a_grid_point_is_strictly_later_even_with_inexact_floats() -> None:
    assert next_tick_after(10.0, 0.1, 10.1) > 10.1


# -- IntervalTicker -------------------------------------------------------------------------


async def test_interval_ticker_ticks_immediately_without_sleeping_first() -> None:
    clock = FakeClock(start=100.0)
    ticker = IntervalTicker(10.0, monotonic=clock.monotonic, sleep=clock.sleep)
    stop = asyncio.Event()
    sleeps_before_first_tick: list[float] | None = None

    async for _ in ticker.ticks(stop):
        sleeps_before_first_tick = list(clock.sleeps)
        stop.set()

    assert sleeps_before_first_tick == []
    assert clock.now == 100.0


async def test_interval_ticker_ticks_every_interval_after_the_first_tick() -> None:
    clock = FakeClock(start=100.0)
    ticker = IntervalTicker(10.0, monotonic=clock.monotonic, sleep=clock.sleep)

    assert await _tick_times(ticker, clock, count=5) == [100.0, 110.0, 120.0, 130.0, 140.0]


async def test_interval_ticker_does_not_drift_when_the_consumer_takes_time_between_ticks() -> None:
    clock = FakeClock(start=100.0)
    ticker = IntervalTicker(10.0, monotonic=clock.monotonic, sleep=clock.sleep)

    ticks = await _tick_times(ticker, clock, count=5, work_seconds=3.0)

    assert ticks == [100.0, 110.0, 120.0, 130.0, 140.0]
    assert clock.sleeps[:4] == [7.0, 7.0, 7.0, 7.0]  # only the rest of each interval


async def test_interval_ticker_skips_missed_ticks_when_the_consumer_overruns_an_interval() -> None:
    clock = FakeClock(start=100.0)
    ticker = IntervalTicker(10.0, monotonic=clock.monotonic, sleep=clock.sleep)

    ticks = await _tick_times(ticker, clock, count=3, work_seconds=25.0)

    # 110 and 120 were missed while working: no burst, the grid resumes at 130, then 160.
    assert ticks == [100.0, 130.0, 160.0]
    assert clock.sleeps[:2] == [5.0, 5.0]


async def test_interval_ticker_does_not_tick_when_stopped_before_the_first_tick() -> None:
    clock = FakeClock(start=100.0)
    ticker = IntervalTicker(10.0, monotonic=clock.monotonic, sleep=clock.sleep)
    stop = asyncio.Event()
    stop.set()

    ticks = [clock.now async for _ in ticker.ticks(stop)]

    assert ticks == []


async def test_interval_ticker_stops_when_the_stop_event_is_set_during_the_wait() -> None:
    clock = FakeClock(start=100.0)
    stop = asyncio.Event()

    async def sleep_interrupted_on_second_wait(stop: asyncio.Event, delay_seconds: float) -> None:
        await clock.sleep(stop, delay_seconds)
        if len(clock.sleeps) == 2:
            stop.set()  # a SIGTERM arrived while waiting for the third tick

    ticker = IntervalTicker(10.0, monotonic=clock.monotonic, sleep=sleep_interrupted_on_second_wait)

    ticks = [clock.now async for _ in ticker.ticks(stop)]

    assert ticks == [100.0, 110.0]


async def test_interval_ticker_an_early_wake_up_does_not_add_an_extra_tick() -> None:
    clock = FakeClock(start=100.0)

    async def sleep_waking_half_a_second_early(stop: asyncio.Event, delay: float) -> None:
        await clock.sleep(stop, delay - 0.5)

    ticker = IntervalTicker(10.0, monotonic=clock.monotonic, sleep=sleep_waking_half_a_second_early)

    ticks = await _tick_times(ticker, clock, count=4)

    # Each wait ends 0.5 s early, but the grid holds: no extra tick at 110.0, 120.0, ...
    assert ticks == [100.0, 109.5, 119.5, 129.5]


@pytest.mark.parametrize("interval", [0.0, -1.0])
def test_interval_ticker_rejects_an_interval_that_is_not_positive(interval: float) -> None:
    with pytest.raises(ValueError, match="interval_seconds"):
        IntervalTicker(interval)


@given(
    interval=st.integers(min_value=1, max_value=1_000),
    works=st.lists(st.integers(min_value=0, max_value=3_000), min_size=1, max_size=20),
)
async def test_interval_ticker_ticks_only_on_grid_points_and_never_twice_on_one(
    interval: int, works: list[int]
) -> None:
    clock = FakeClock(start=1_000.0)
    ticker = IntervalTicker(float(interval), monotonic=clock.monotonic, sleep=clock.sleep)
    stop = asyncio.Event()
    ticks: list[float] = []
    async for _ in ticker.ticks(stop):
        ticks.append(clock.now)
        if len(ticks) > len(works):
            stop.set()
        else:
            clock.now += works[len(ticks) - 1]

    assert ticks[0] == 1_000.0
    assert all((tick - 1_000.0) % interval == 0 for tick in ticks)
    for earlier, later, work in zip(ticks, ticks[1:], works, strict=False):
        assert later > earlier + work  # after the work, and never two ticks at one instant
        assert interval <= later - earlier <= work + interval  # no burst, no needless wait


async def test_interval_ticker_never_ticks_twice_at_one_instant_with_inexact_floats() -> None:
    clock = FakeClock(start=10.0)
    ticker = IntervalTicker(0.1, monotonic=clock.monotonic, sleep=clock.sleep)

    ticks = await _tick_times(ticker, clock, count=4)

    assert all(later > earlier for earlier, later in pairwise(ticks))


# -- wait_or_stop ---------------------------------------------------------------------------


async def test_wait_or_stop_returns_at_once_when_the_stop_event_is_already_set() -> None:
    stop = asyncio.Event()
    stop.set()

    async with asyncio.timeout(5):  # a safety net: an hour-long wait must not happen
        await wait_or_stop(stop, 3_600.0)


async def test_wait_or_stop_returns_at_once_for_a_delay_that_is_not_positive() -> None:
    stop = asyncio.Event()

    async with asyncio.timeout(5):  # a safety net, not a timing
        await wait_or_stop(stop, 0.0)
        await wait_or_stop(stop, -1.0)

    assert not stop.is_set()


async def test_wait_or_stop_wakes_when_the_stop_event_is_set_while_waiting() -> None:
    stop = asyncio.Event()
    waiting = asyncio.create_task(wait_or_stop(stop, 3_600.0))
    await asyncio.sleep(0)  # let it start waiting

    stop.set()

    async with asyncio.timeout(5):  # a safety net, not a timing
        await waiting
