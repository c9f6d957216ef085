"""The metrics sink: the spec's names and types, counted per batch, on its own registry."""

from __future__ import annotations

import math
from uuid import uuid4

import pytest
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from slot_expiration.db import MisconfiguredStoreError, SchemaMissingError, TransientStoreError
from slot_expiration.domain import CycleOutcome
from slot_expiration.expiry import (
    BACKLOG_COUNT_CAP,
    BacklogMeasured,
    BatchCommitted,
    ClockCompared,
    ClockSkewError,
    CycleEnded,
    CycleProgress,
    CycleStarted,
)
from slot_expiration.loop import Event, LoopStarted, TickSkipped
from slot_expiration.telemetry.metrics import DURATION_BUCKETS, Metrics
from tests.support.results import AS_OF, FakeClock, batch, cycle_result, ended, failure

P = "calendar_slot_expiration"


def _value(recorded: Metrics, name: str, **labels: str) -> float:
    value = recorded.registry.get_sample_value(name, labels or None)
    assert value is not None, f"{name}{labels} is not exported"
    return value


def _sinks() -> tuple[Metrics, FakeClock]:
    wall = FakeClock(1_796_000_000.0)
    return Metrics(wall_clock=wall), wall


def _feed(metrics: Metrics, *events: Event) -> None:
    for event in events:
        metrics(event)


def test_every_metric_has_the_name_and_type_the_spec_and_the_issue_give() -> None:
    recorded, _ = _sinks()

    families = {
        f.name: f.type for f in text_string_to_metric_families(recorded.exposition().decode())
    }

    assert {name: kind for name, kind in families.items() if name.startswith(P)} == {
        f"{P}_cycle_duration_seconds": "histogram",
        f"{P}_items": "counter",
        f"{P}_backlog": "gauge",
        f"{P}_backlog_capped": "gauge",
        f"{P}_backlog_change": "gauge",
        f"{P}_skip_locked": "counter",
        f"{P}_errors": "counter",
        f"{P}_last_success_timestamp_seconds": "gauge",
        f"{P}_cycles": "counter",
        f"{P}_skipped_ticks": "counter",
        f"{P}_misconfigured": "gauge",
        f"{P}_clock_skew_seconds": "gauge",
        f"{P}_interval_seconds": "gauge",
        f"{P}_quarantined_slots": "gauge",
        f"{P}_quarantine_oldest_age_seconds": "gauge",
        f"{P}_paused": "gauge",
        f"{P}_pause_age_seconds": "gauge",
        f"{P}_pause_limit_seconds": "gauge",
        f"{P}_http_bad_requests": "counter",
        f"{P}_sink_failures": "counter",
        f"{P}_throttled_seconds": "counter",
        f"{P}_replica_lag_seconds": "gauge",
        f"{P}_build_info": "gauge",
    }
    exposed = recorded.exposition().decode()
    samples = ("items_total", "skip_locked_total", "errors_total", "cycles_total")
    for sample in (*samples, "http_bad_requests_total"):
        assert f"\n{P}_{sample}" in exposed


def test_cycle_duration_buckets_resolve_1_ms_to_60_s() -> None:
    assert DURATION_BUCKETS[0] == 0.001
    assert DURATION_BUCKETS[-1] == 60.0
    assert list(DURATION_BUCKETS) == sorted(DURATION_BUCKETS)
    recorded, _ = _sinks()
    recorded(CycleEnded(cycle_result(duration_ms=3.0)))

    bucket = f"{P}_cycle_duration_seconds_bucket"
    assert _value(recorded, bucket, le="0.0025") == 0
    assert _value(recorded, bucket, le="0.005") == 1
    assert _value(recorded, bucket, le="60.0") == 1


def test_every_outcome_is_exported_at_zero_before_any_cycle() -> None:
    recorded, _ = _sinks()

    for outcome in CycleOutcome:  # a new outcome without its label fails here
        assert _value(recorded, f"{P}_cycles_total", outcome=outcome.value) == 0
    assert {"success", "failed", "budget_exceeded", "misconfigured", "clock_skew"} <= {
        outcome.value for outcome in CycleOutcome
    }  # the labels dashboards and alerts select by
    assert _value(recorded, f"{P}_last_success_timestamp_seconds") == 0
    assert _value(recorded, f"{P}_backlog") == 0
    assert _value(recorded, f"{P}_interval_seconds") == 0
    assert _value(recorded, f"{P}_quarantined_slots") == 0


def test_items_skip_locked_and_errors_are_counted_per_batch_as_each_commits() -> None:
    recorded, _ = _sinks()
    run_id = uuid4()
    _feed(
        recorded,
        CycleStarted(run_id, AS_OF),
        BatchCommitted(run_id, batch(expired=500, skipped_locked=3, number=1)),
        BatchCommitted(run_id, batch(expired=200, failures=[failure(), failure()], number=2)),
    )

    assert _value(recorded, f"{P}_items_total") == 700
    assert _value(recorded, f"{P}_skip_locked_total") == 3
    assert _value(recorded, f"{P}_errors_total") == 2


def test_batches_committed_before_a_cycle_fails_stay_counted() -> None:
    recorded, _ = _sinks()
    run_id = uuid4()
    _feed(
        recorded,
        CycleStarted(run_id, AS_OF),
        BatchCommitted(run_id, batch(expired=500)),
        ended(CycleOutcome.FAILED, ConnectionError("server closed"), run_id=run_id),
    )

    assert _value(recorded, f"{P}_items_total") == 500
    assert _value(recorded, f"{P}_cycles_total", outcome="failed") == 1
    assert _value(recorded, f"{P}_cycles_total", outcome="success") == 0


def test_a_completed_cycle_sets_the_backlog_the_last_success_and_observes_its_duration() -> None:
    recorded, wall = _sinks()
    result = cycle_result(expired=500, backlog=5_500, duration_ms=250.0)
    _feed(
        recorded,
        CycleStarted(result.run_id, AS_OF),
        BacklogMeasured(result.run_id, 5_500, 0),
        CycleEnded(result),
    )

    assert _value(recorded, f"{P}_backlog") == 5_500
    assert _value(recorded, f"{P}_last_success_timestamp_seconds") == wall.now
    assert _value(recorded, f"{P}_cycles_total", outcome="success") == 1
    assert _value(recorded, f"{P}_cycle_duration_seconds_sum") == 0.25
    assert _value(recorded, f"{P}_cycle_duration_seconds_count") == 1


@pytest.mark.parametrize(
    "outcome", [CycleOutcome.BUDGET_EXCEEDED, CycleOutcome.FAILED, CycleOutcome.INTERRUPTED]
)
def test_a_failed_cycle_counts_its_outcome_keeps_the_last_success_and_observes_its_duration(
    outcome: CycleOutcome,
) -> None:
    recorded, wall = _sinks()
    recorded(CycleEnded(cycle_result(backlog=10)))
    success_at = wall.now
    wall.advance(300)
    run_id = uuid4()
    _feed(
        recorded,
        CycleStarted(run_id, AS_OF),
        BacklogMeasured(run_id, 12, 0),
        ended(outcome, TimeoutError("budget"), run_id=run_id, duration_ms=30_000),
    )

    assert _value(recorded, f"{P}_cycles_total", outcome=outcome.value) == 1
    assert _value(recorded, f"{P}_last_success_timestamp_seconds") == success_at
    assert _value(recorded, f"{P}_backlog") == 12  # measured although the cycle failed
    assert _value(recorded, f"{P}_misconfigured") == 0
    assert _value(recorded, f"{P}_cycle_duration_seconds_count") == 2
    assert _value(recorded, f"{P}_cycle_duration_seconds_bucket", le="15.0") == 1
    assert _value(recorded, f"{P}_cycle_duration_seconds_bucket", le="30.0") == 2


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (
            MisconfiguredStoreError("permission denied for table availability_slots", "42501"),
            CycleOutcome.MISCONFIGURED,
        ),
        (SchemaMissingError('column "version" does not exist'), CycleOutcome.MISCONFIGURED),
        (ClockSkewError(7_200.0, 30.0), CycleOutcome.CLOCK_SKEW),
    ],
)
def test_a_cycle_only_a_person_can_fix_counts_its_outcome_and_raises_the_gauge_until_a_success(
    error: Exception, outcome: CycleOutcome
) -> None:
    recorded, _ = _sinks()
    recorded(ended(outcome, error))

    assert _value(recorded, f"{P}_cycles_total", outcome=outcome.value) == 1
    assert _value(recorded, f"{P}_cycles_total", outcome="failed") == 0
    assert _value(recorded, f"{P}_misconfigured") == 1
    transient = TransientStoreError("server closed the connection", "08006")
    recorded(ended(CycleOutcome.FAILED, transient))
    assert _value(recorded, f"{P}_misconfigured") == 1  # a transient failure proves nothing
    recorded(CycleEnded(cycle_result()))
    assert _value(recorded, f"{P}_misconfigured") == 0


def test_the_last_success_is_stamped_on_the_databases_clock_when_the_workers_runs_slow() -> None:
    """A host two hours slow must not look two hours late to the no-success alert."""
    recorded, wall = _sinks()
    progress = CycleProgress(uuid4(), AS_OF, AS_OF)
    progress.clock_skew_seconds = -7_200.0  # the worker's clock minus the database's

    recorded(CycleEnded(progress.result(CycleOutcome.SUCCESS, 40.0)))

    assert _value(recorded, f"{P}_last_success_timestamp_seconds") == wall.now + 7_200


def _trend_metrics(interval_seconds: float | None = None) -> tuple[Metrics, FakeClock]:
    monotonic = FakeClock()
    recorded = Metrics(wall_clock=FakeClock(1_796_000_000.0), monotonic=monotonic)
    if interval_seconds is not None:
        recorded(LoopStarted(interval_seconds, 500))
    return recorded, monotonic


def _cycle(
    recorded: Metrics,
    backlog: int | None,
    *,
    expired: int = 500,
    outcome: CycleOutcome = CycleOutcome.SUCCESS,
) -> float:
    """One cycle that counted `backlog` (None: it could not) and ended as `outcome`;
    returns the backlog change exported after it."""
    run_id = uuid4()
    recorded(CycleStarted(run_id, AS_OF))
    if backlog is not None:
        recorded(BacklogMeasured(run_id, backlog, 0))
    if outcome is CycleOutcome.SUCCESS:
        recorded(CycleEnded(cycle_result(run_id, expired=expired, backlog=backlog)))
    else:
        recorded(ended(outcome, TransientStoreError("connection refused", "08001"), run_id=run_id))
    return _value(recorded, f"{P}_backlog_change")


def test_the_backlog_change_is_nan_until_two_successes_in_a_row_then_their_difference() -> None:
    recorded, clock = _trend_metrics()

    first = _cycle(recorded, 20_000)
    clock.advance(300)
    second = _cycle(recorded, 19_500)
    clock.advance(300)
    third = _cycle(recorded, 19_000)

    assert math.isnan(first)
    assert (second, third) == (-500, -1_000)


def test_the_backlog_change_reads_back_half_an_hour_at_most() -> None:
    recorded, clock = _trend_metrics()
    changes = []
    for backlog in range(20_000, 15_500, -500):  # nine cycles, five minutes apart
        changes.append(_cycle(recorded, backlog))
        clock.advance(300)

    assert changes[-1] == 16_000 - 19_000  # the cycle 30 minutes before the latest


def test_a_count_that_jumps_after_an_outage_and_then_falls_shows_a_backlog_coming_down() -> None:
    """The gauge holds while cycles fail, then jumps: slots kept starting. The trend is not
    read across the outage, so the drain that resumes is a drain."""
    recorded, clock = _trend_metrics()
    for backlog in (20_000, 19_500, 19_000, 18_500):
        _cycle(recorded, backlog)
        clock.advance(300)
    before = _value(recorded, f"{P}_backlog_change")
    for _ in range(4):  # 20 minutes of failed cycles that could not count
        held = _cycle(recorded, None, outcome=CycleOutcome.FAILED)
        clock.advance(300)
    after_outage = _cycle(recorded, 21_000)
    clock.advance(300)
    next_cycle = _cycle(recorded, 20_500)

    assert before == -1_500
    assert held == before  # nothing new while cycles fail
    assert after_outage == before  # one count after a gap: nothing to compare it with yet
    assert next_cycle == -500
    assert _value(recorded, f"{P}_backlog") == 20_500


def test_above_the_cap_the_change_is_minus_the_slots_expired_meanwhile() -> None:
    draining, _ = _trend_metrics()
    stuck, _ = _trend_metrics()
    for recorded, expired in ((draining, 500), (stuck, 0)):
        _cycle(recorded, BACKLOG_COUNT_CAP, expired=expired)
        _cycle(recorded, BACKLOG_COUNT_CAP, expired=expired)
        _cycle(recorded, BACKLOG_COUNT_CAP, expired=expired)

    assert _value(draining, f"{P}_backlog_capped") == 1
    assert _value(draining, f"{P}_backlog_change") == -1_000
    assert _value(stuck, f"{P}_backlog_change") == 0
    _cycle(draining, BACKLOG_COUNT_CAP - 1)
    assert _value(draining, f"{P}_backlog_capped") == 0


def test_with_a_one_hour_interval_the_trend_window_is_three_intervals() -> None:
    recorded, clock = _trend_metrics(interval_seconds=3_600)
    for backlog in (20_000, 19_500, 19_000, 18_500, 18_000):
        change = _cycle(recorded, backlog)
        clock.advance(3_600)

    assert change == 18_000 - 19_500


def test_the_oldest_quarantined_slots_age_follows_the_last_measure() -> None:
    recorded, _ = _sinks()
    recorded(BacklogMeasured(uuid4(), 0, 3, 4_000.0))
    aged = _value(recorded, f"{P}_quarantine_oldest_age_seconds")
    recorded(BacklogMeasured(uuid4(), 0, 0, None))

    assert aged == 4_000
    assert _value(recorded, f"{P}_quarantine_oldest_age_seconds") == 0


def test_the_clock_skew_of_each_cycle_is_exported() -> None:
    recorded, _ = _sinks()
    recorded(ClockCompared(uuid4(), -4.5))

    assert _value(recorded, f"{P}_clock_skew_seconds") == -4.5


def test_the_loops_interval_is_exported_when_the_loop_starts() -> None:
    recorded, _ = _sinks()
    recorded(LoopStarted(3_600.0, 500))

    assert _value(recorded, f"{P}_interval_seconds") == 3_600


def test_the_quarantine_gauge_follows_the_last_count_measured() -> None:
    recorded, _ = _sinks()
    _feed(recorded, BacklogMeasured(uuid4(), 0, 3), BacklogMeasured(uuid4(), 0, 1))

    assert _value(recorded, f"{P}_quarantined_slots") == 1


def test_each_skipped_tick_is_counted() -> None:
    recorded, _ = _sinks()
    _feed(recorded, TickSkipped(1), TickSkipped(2))

    assert _value(recorded, f"{P}_skipped_ticks_total") == 2


def test_each_sink_has_its_own_registry_and_the_global_one_stays_clean() -> None:
    first, second = Metrics(), Metrics(CollectorRegistry())
    first(BatchCommitted(uuid4(), batch(expired=3)))

    assert first.registry is not second.registry
    assert first.registry.get_sample_value(f"{P}_items_total") == 3
    assert second.registry.get_sample_value(f"{P}_items_total") == 0
    assert REGISTRY.get_sample_value(f"{P}_items_total") is None


def test_no_slot_or_tenant_id_ever_appears_in_the_metrics() -> None:
    recorded, _ = _sinks()
    run_id = uuid4()
    failed = failure()
    _feed(
        recorded,
        CycleStarted(run_id, AS_OF),
        BatchCommitted(run_id, batch(expired=20, failures=[failed])),
        CycleEnded(cycle_result(run_id=run_id, expired=20, failed=1)),
    )

    text = recorded.exposition().decode()
    ids = {str(failed.slot.id), str(failed.slot.tenant_id), str(run_id)}
    assert not [i for i in ids if i in text]
    assert "slot refuses" not in text
