"""The drain's throttle as pure decisions: a standby's lag from the primary's WAL positions
seen over time (its own `replay_lag` goes stale while its replay is paused), the nice rest in
proportion to a batch's time, and the reason a cycle's result gives for its waits."""

from __future__ import annotations

from uuid import uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slot_expiration.domain import CycleOutcome
from slot_expiration.expiry.result import CycleProgress, StopReason
from slot_expiration.expiry.throttle import (
    BASELINE_BATCHES,
    MAX_COUNTED_SLOWDOWN,
    MAX_SAMPLES,
    LatencyWatch,
    ReplicaWatch,
    Standby,
    ThrottleReason,
    nice_rest_seconds,
)
from tests.support.results import AS_OF

MB = 1024 * 1024


def _standby(wal: int, replay: int | None, replay_lag: float | None = None) -> Standby:
    return Standby("standby@127.0.0.1:1", wal, replay, replay_lag)


def test_no_standby_is_no_lag() -> None:
    assert ReplicaWatch().lag_seconds([], now=10.0) == 0.0


def test_a_standby_that_replayed_everything_is_not_behind() -> None:
    watch = ReplicaWatch()

    assert watch.lag_seconds([_standby(5 * MB, 5 * MB)], now=1.0) == 0.0
    assert watch.lag_seconds([_standby(9 * MB, 9 * MB)], now=2.0) == 0.0


def test_a_paused_replay_grows_its_lag_with_the_time_since_the_primary_went_past_it() -> None:
    """Replay stopped at 5 MB while the primary writes on: its lag is the time since the
    primary was first seen past 5 MB, however stale its own replay_lag (here 0.2 s)."""
    watch = ReplicaWatch()
    watch.lag_seconds([_standby(5 * MB, 5 * MB)], now=100.0)

    assert watch.lag_seconds([_standby(6 * MB, 5 * MB, 0.2)], now=101.0) == pytest.approx(0.2)
    assert watch.lag_seconds([_standby(7 * MB, 5 * MB, 0.2)], now=104.5) == pytest.approx(3.5)
    assert watch.lag_seconds([_standby(7 * MB, 5 * MB, 0.2)], now=112.0) == pytest.approx(11.0)


def test_the_standbys_own_replay_lag_counts_when_it_is_larger() -> None:
    watch = ReplicaWatch()

    assert watch.lag_seconds([_standby(6 * MB, 5 * MB, 42.0)], now=1.0) == 42.0


def test_once_replay_catches_up_the_lag_is_gone_and_old_positions_forgotten() -> None:
    watch = ReplicaWatch()
    watch.lag_seconds([_standby(5 * MB, 5 * MB)], now=0.0)
    watch.lag_seconds([_standby(6 * MB, 5 * MB)], now=1.0)
    assert watch.lag_seconds([_standby(8 * MB, 5 * MB)], now=30.0) == pytest.approx(29.0)

    assert watch.lag_seconds([_standby(9 * MB, 9 * MB)], now=31.0) == 0.0
    # Behind again later: measured from when the primary passed its new position.
    assert watch.lag_seconds([_standby(10 * MB, 9 * MB)], now=40.0) == 0.0
    assert watch.lag_seconds([_standby(11 * MB, 9 * MB)], now=42.0) == pytest.approx(2.0)


def test_the_slowest_of_several_standbys_is_the_lag() -> None:
    watch = ReplicaWatch()
    watch.lag_seconds([_standby(5 * MB, 5 * MB), _standby(5 * MB, 5 * MB)], now=0.0)
    watch.lag_seconds([_standby(6 * MB, 6 * MB), _standby(6 * MB, 5 * MB)], now=2.0)

    lag = watch.lag_seconds([_standby(7 * MB, 7 * MB), _standby(7 * MB, 5 * MB)], now=9.0)

    assert lag == pytest.approx(7.0)


def test_positions_it_cannot_see_are_no_verdict() -> None:
    assert ReplicaWatch().lag_seconds([_standby(5 * MB, None)], now=1.0) is None


def test_the_positions_kept_are_bounded_and_the_oldest_kept_bounds_the_lag() -> None:
    watch = ReplicaWatch()
    for step in range(MAX_SAMPLES + 50):
        watch.lag_seconds([_standby(MB + step + 1, MB)], now=float(step))

    last = float(MAX_SAMPLES + 49)
    lag = watch.lag_seconds([_standby(MB + MAX_SAMPLES + 60, MB)], now=last + 1)

    assert len(watch._samples) == MAX_SAMPLES
    assert lag == pytest.approx(last + 1 - 51)  # at least as old as the oldest kept


@given(
    batch=st.floats(min_value=0, max_value=1e4, allow_nan=False),
    ratio=st.floats(min_value=0, max_value=100, allow_nan=False),
)
def test_the_nice_rest_is_the_ratio_times_the_batch(batch: float, ratio: float) -> None:
    assert nice_rest_seconds(batch, ratio) == pytest.approx(batch * ratio)


def test_no_ratio_no_rest() -> None:
    assert nice_rest_seconds(0.8, 0.0) == 0.0


def test_a_cycles_result_counts_its_waits_and_names_the_reason_it_waited_longest_for() -> None:
    progress = CycleProgress(run_id=uuid4(), as_of=AS_OF, started_at=AS_OF)
    progress.throttled(ThrottleReason.NICE, 0.5)
    progress.throttled(ThrottleReason.REPLICA_LAG, 0.25)
    progress.throttled(ThrottleReason.REPLICA_LAG, 0.75)

    result = progress.result(CycleOutcome.SUCCESS, 10.0, StopReason.THROTTLED)

    assert result.throttled_seconds == pytest.approx(1.5)
    assert result.throttled_by is ThrottleReason.REPLICA_LAG
    assert result.stop_reason is StopReason.THROTTLED


def test_a_cycle_that_never_waited_names_no_reason() -> None:
    progress = CycleProgress(run_id=uuid4(), as_of=AS_OF, started_at=AS_OF)

    result = progress.result(CycleOutcome.SUCCESS, 10.0, StopReason.DRAINED)

    assert (result.throttled_seconds, result.throttled_by) == (0.0, None)


def test_batches_at_their_usual_pace_never_rest_the_drain() -> None:
    watch = LatencyWatch()

    rests = [watch.rest_seconds(0.04 + i % 3 * 0.01, 2_000, 2.0) for i in range(20)]

    assert rests == [0.0] * 20


def test_a_batch_slower_than_allowed_rests_the_slowdown_less_one_times_its_time() -> None:
    watch = LatencyWatch()
    watch.rest_seconds(0.04, 2_000, 2.0)  # the baseline: 20 us a row

    assert watch.rest_seconds(0.12, 2_000, 2.0) == pytest.approx(0.12 * 2)  # 3 x slower
    assert watch.rest_seconds(0.07, 2_000, 2.0) == 0.0  # 1.75 x: within the limit


def test_the_baseline_is_per_row_so_a_smaller_batch_is_not_read_as_a_faster_database() -> None:
    watch = LatencyWatch()
    watch.rest_seconds(0.04, 2_000, 2.0)

    assert watch.rest_seconds(0.01, 500, 2.0) == 0.0  # the same 20 us a row


def test_a_stalled_batch_counts_as_ten_times_slower_at_most() -> None:
    watch = LatencyWatch()
    watch.rest_seconds(0.01, 500, 2.0)

    assert watch.rest_seconds(5.0, 500, 2.0) == pytest.approx(5.0 * (MAX_COUNTED_SLOWDOWN - 1))


def test_the_baseline_forgets_batches_older_than_its_window() -> None:
    watch = LatencyWatch()
    watch.rest_seconds(0.01, 500, 2.0)  # one fast batch, long ago
    for _ in range(BASELINE_BATCHES):
        watch.rest_seconds(0.05, 500, 2.0)

    assert watch.rest_seconds(0.06, 500, 2.0) == 0.0  # against 0.05 now, not 0.01


def test_no_limit_no_rest() -> None:
    watch = LatencyWatch()
    watch.rest_seconds(0.01, 500, 0.0)

    assert watch.rest_seconds(1.0, 500, 0.0) == 0.0
