"""The log sink: stable event names, one event per fact, never one per expired slot."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import MutableMapping, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest
from structlog.testing import capture_logs

from slot_expiration.cycle import (
    BatchCommitted,
    BatchResult,
    BatchStarted,
    ClockSkewError,
    CycleEnded,
    CycleResult,
    CycleStarted,
    StopReason,
)
from slot_expiration.domain import CycleOutcome, SlotRef
from slot_expiration.loop import (
    Event,
    LoopStarted,
    LoopStopped,
    LoopStopping,
    TickSkipped,
    fan_out,
)
from slot_expiration.quarantine import ItemFailure
from slot_expiration.store import MisconfiguredStoreError, TransientStoreError
from slot_expiration.telemetry import LogEvent, LogSink

AS_OF = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)

LogEntry = MutableMapping[str, Any]


def _slots(count: int) -> tuple[SlotRef, ...]:
    return tuple(SlotRef(id=uuid4(), tenant_id=uuid4()) for _ in range(count))


def _batch(expired: int = 0, failures: Sequence[ItemFailure] = ()) -> BatchResult:
    return BatchResult(
        number=1,
        expired=_slots(expired),
        failures=tuple(failures),
        skipped_locked_count=0,
        duration_ms=5.0,
        exhausted=True,
    )


def _result(
    expired: int = 0,
    failed: int = 0,
    skipped_locked: int = 0,
    duration_ms: float = 12.3456,
    batches: int = 1,
    *,
    outcome: CycleOutcome = CycleOutcome.SUCCESS,
) -> CycleResult:
    return CycleResult(
        run_id=uuid4(),
        as_of=AS_OF,
        started_at=AS_OF,
        outcome=outcome,
        batches=batches,
        expired_count=expired,
        skipped_locked_count=skipped_locked,
        failed_count=failed,
        failed_sample=_slots(min(failed, 10)),
        duration_ms=duration_ms,
        stop_reason=StopReason.DRAINED if outcome is CycleOutcome.SUCCESS else None,
    )


def _failed(outcome: CycleOutcome, error: BaseException) -> CycleEnded:
    return CycleEnded(_result(outcome=outcome), error)


NEXT_ATTEMPT = datetime(2026, 12, 2, 12, 5, tzinfo=UTC)


def _failure(sqlstate: str = "23514", attempts: int = 1) -> ItemFailure:
    (slot,) = _slots(1)
    return ItemFailure(
        slot=slot,
        sqlstate=sqlstate,
        message="slot refuses to expire",
        attempts=attempts,
        next_attempt_at=NEXT_ATTEMPT,
    )


def _events(logs: list[LogEntry]) -> list[str]:
    return [str(entry["event"]) for entry in logs]


def _only(logs: list[LogEntry], event: str) -> LogEntry:
    matching = [entry for entry in logs if entry["event"] == event]
    assert len(matching) == 1, f"expected one {event}, got {_events(logs)}"
    return matching[0]


def _log(*events: Event) -> None:
    sink = LogSink()
    for event in events:
        sink(event)


def test_event_names_are_the_stable_contract() -> None:
    assert (
        LogEvent.CYCLE_STARTED,
        LogEvent.BATCH_SELECTED,
        LogEvent.ITEM_FAILED,
        LogEvent.CYCLE_COMPLETED,
        LogEvent.CYCLE_FAILED,
        LogEvent.TICK_SKIPPED,
        LogEvent.WORKER_STARTED,
        LogEvent.WORKER_STOPPING,
        LogEvent.WORKER_STOPPED,
    ) == (
        "cycle.started",
        "batch.selected",
        "item.failed",
        "cycle.completed",
        "cycle.failed",
        "tick.skipped",
        "worker.started",
        "worker.stopping",
        "worker.stopped",
    )


def test_every_event_logs_its_stable_event_name() -> None:
    with capture_logs() as logs:
        _log(
            LoopStarted(interval_seconds=300.0, batch_size=500),
            CycleStarted(uuid4(), AS_OF),
            BatchStarted(uuid4(), 1),
            BatchCommitted(uuid4(), _batch(expired=2, failures=[_failure()])),
            CycleEnded(_result(expired=2, failed=1)),
            _failed(CycleOutcome.FAILED, RuntimeError("connection lost")),
            TickSkipped(1),
            LoopStopping(cycle_in_flight=False),
            LoopStopped(),
        )

    assert _events(logs) == [
        "worker.started",
        "cycle.started",
        "batch.selected",
        "item.failed",
        "cycle.completed",
        "cycle.failed",
        "tick.skipped",
        "worker.stopping",
        "worker.stopped",
    ]


def test_cycle_started_carries_the_run_id_and_as_of() -> None:
    run_id = uuid4()
    with capture_logs() as logs:
        _log(CycleStarted(run_id, AS_OF))

    entry = _only(logs, "cycle.started")
    assert entry["run_id"] == str(run_id)
    assert entry["as_of"] == AS_OF.isoformat()
    assert entry["log_level"] == "info"


def test_cycle_completed_carries_expired_skipped_locked_and_duration_ms() -> None:
    result = _result(expired=3, skipped_locked=4, duration_ms=12.3456, batches=2)
    with capture_logs() as logs:
        _log(CycleEnded(result))

    entry = _only(logs, "cycle.completed")
    assert entry["log_level"] == "info"
    assert entry["run_id"] == str(result.run_id)
    assert entry["expired_count"] == 3
    assert entry["skipped_locked_count"] == 4
    assert entry["failed_count"] == 0
    assert entry["duration_ms"] == 12.346
    assert entry["batches"] == 2
    assert entry["stop_reason"] == "drained"


def test_batch_selected_counts_the_expired_and_the_failed_rows() -> None:
    run_id = uuid4()
    with capture_logs() as logs:
        _log(BatchCommitted(run_id, _batch(expired=5, failures=[_failure(), _failure()])))

    entry = _only(logs, "batch.selected")
    assert (entry["count"], entry["batch"], entry["run_id"]) == (7, 1, str(run_id))


def test_a_batch_of_500_expired_slots_logs_one_batch_selected_and_no_per_slot_event() -> None:
    batch = _batch(expired=500)
    with capture_logs() as logs:
        _log(BatchStarted(uuid4(), 1), BatchCommitted(uuid4(), batch))

    assert _events(logs) == ["batch.selected"]
    assert all(str(slot.id) not in repr(logs) for slot in batch.expired)


def test_each_failed_item_is_logged_once_at_error_with_its_slot_id_and_sqlstate() -> None:
    failures = [_failure("23514"), _failure("P0001", attempts=3), _failure("22012")]
    run_id = uuid4()
    with capture_logs() as logs:
        _log(BatchCommitted(run_id, _batch(expired=10, failures=failures)))

    items = [entry for entry in logs if entry["event"] == "item.failed"]
    assert len(items) == len(failures)
    for entry, failure in zip(items, failures, strict=True):
        assert entry["log_level"] == "error"
        assert entry["slot_id"] == str(failure.slot.id)
        assert entry["tenant_id"] == str(failure.slot.tenant_id)
        assert entry["sqlstate"] == failure.sqlstate
        assert entry["exception"] == "slot refuses to expire"
        assert entry["run_id"] == str(run_id)
        assert entry["attempts"] == failure.attempts
        assert entry["next_attempt_at"] == NEXT_ATTEMPT.isoformat()


@pytest.mark.parametrize(
    ("outcome", "error", "sqlstate"),
    [
        (
            CycleOutcome.MISCONFIGURED,
            MisconfiguredStoreError("permission denied for table x", "42501"),
            "42501",
        ),
        (CycleOutcome.CLOCK_SKEW, ClockSkewError(7_200.0, 30.0), None),
        (CycleOutcome.FAILED, TransientStoreError("terminating connection", "57P01"), "57P01"),
        (CycleOutcome.BUDGET_EXCEEDED, TimeoutError("ran past its budget"), None),
        (CycleOutcome.INTERRUPTED, asyncio.CancelledError(), None),
    ],
)  # fmt: skip - one case a line: outcome, its cause, the SQLSTATE logged
def test_cycle_failed_names_the_outcome_as_its_reason_with_the_sqlstate_and_error(
    outcome: CycleOutcome, error: BaseException, sqlstate: str | None
) -> None:
    ended = _failed(outcome, error)
    with capture_logs() as logs:
        _log(ended)

    entry = _only(logs, "cycle.failed")
    assert entry["log_level"] == "error"
    assert (entry["reason"], entry["sqlstate"]) == (outcome.value, sqlstate)
    assert entry["run_id"] == str(ended.run_id)
    assert entry["error_type"] == type(error).__name__
    assert entry["exception"] == (str(error) or type(error).__name__)


def test_cycle_failed_with_an_empty_message_logs_the_error_type_instead() -> None:
    with capture_logs() as logs:
        _log(_failed(CycleOutcome.BUDGET_EXCEEDED, TimeoutError()))

    assert _only(logs, "cycle.failed")["exception"] == "TimeoutError"


@pytest.mark.parametrize("outcome", list(CycleOutcome))
def test_every_outcome_is_logged_at_its_own_log_level(outcome: CycleOutcome) -> None:
    error = None if outcome is CycleOutcome.SUCCESS else RuntimeError("why")
    with capture_logs() as logs:
        _log(CycleEnded(_result(outcome=outcome), error))

    (entry,) = logs
    assert entry["log_level"] == logging.getLevelName(outcome.log_level).lower()
    assert entry["event"] == ("cycle.completed" if error is None else "cycle.failed")


def test_tick_skipped_is_a_warning_with_the_running_total() -> None:
    with capture_logs() as logs:
        _log(TickSkipped(3))

    entry = _only(logs, "tick.skipped")
    assert entry["log_level"] == "warning"
    assert entry["skipped_ticks_total"] == 3


def test_worker_lifecycle_events_carry_their_settings() -> None:
    with capture_logs() as logs:
        _log(
            LoopStarted(interval_seconds=300.0, batch_size=500),
            LoopStopping(cycle_in_flight=True),
            LoopStopped(),
        )

    started = _only(logs, "worker.started")
    assert (started["interval_seconds"], started["batch_size"]) == (300.0, 500)
    assert _only(logs, "worker.stopping")["cycle_in_flight"] is True
    assert _only(logs, "worker.stopped")["log_level"] == "info"


# -- fan_out ----------------------------------------------------------------------------------


def test_fan_out_passes_each_event_to_every_sink_in_order() -> None:
    calls: list[tuple[str, Event]] = []
    events: list[Event] = [
        LoopStarted(300.0, 500),
        CycleStarted(uuid4(), AS_OF),
        BatchStarted(uuid4(), 1),
        CycleEnded(_result(expired=1)),
        TickSkipped(2),
        LoopStopped(),
    ]

    emit = fan_out(
        lambda event: calls.append(("first", event)), lambda event: calls.append(("second", event))
    )
    for event in events:
        emit(event)

    assert calls == [(sink, event) for event in events for sink in ("first", "second")]


def test_fan_out_to_the_log_sink_writes_the_log_events() -> None:
    with capture_logs() as logs:
        fan_out(LogSink())(TickSkipped(1))

    assert _events(logs) == ["tick.skipped"]
