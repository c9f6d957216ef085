"""The log sink: stable event names, one event per fact, never one per expired slot."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import MutableMapping
from dataclasses import replace
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from structlog.testing import capture_logs

from slot_expiration.db import MisconfiguredStoreError, TransientStoreError
from slot_expiration.domain import CycleOutcome
from slot_expiration.domain.text import MAX_MESSAGE_CHARS
from slot_expiration.expiry import (
    BatchCommitted,
    BatchStarted,
    ClockSkewError,
    CycleEnded,
    CycleStarted,
)
from slot_expiration.loop import (
    Event,
    LoopStarted,
    LoopStopped,
    LoopStopping,
    TickSkipped,
    fan_out,
)
from slot_expiration.telemetry import LogEvent, LogSink
from tests.support.results import AS_OF, batch, cycle_result, ended, failure

LogEntry = MutableMapping[str, Any]
NEXT_ATTEMPT = AS_OF + timedelta(minutes=5)  # tests.support.results.failure's


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
        LogEvent.DRAIN_STARTED,
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
        "drain.started",
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
            BatchCommitted(uuid4(), batch(expired=2, failures=[failure()])),
            CycleEnded(cycle_result(expired=2, failed=1)),
            ended(CycleOutcome.FAILED, RuntimeError("connection lost")),
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
    result = cycle_result(expired=3, skipped_locked=4, duration_ms=12.3456, batches=2)
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
        _log(BatchCommitted(run_id, batch(expired=5, failures=[failure(), failure()])))

    entry = _only(logs, "batch.selected")
    assert (entry["count"], entry["batch"], entry["run_id"]) == (7, 1, str(run_id))


def test_a_batch_of_500_expired_slots_logs_one_batch_selected_and_no_per_slot_event() -> None:
    committed = batch(expired=500)
    with capture_logs() as logs:
        _log(BatchStarted(uuid4(), 1), BatchCommitted(uuid4(), committed))

    assert _events(logs) == ["batch.selected"]
    assert logs[-1]["count"] == 500


def test_each_failed_item_is_logged_once_at_error_with_its_slot_id_and_sqlstate() -> None:
    failures = [
        failure(sqlstate="23514"),
        failure(sqlstate="P0001", attempts=3),
        failure(sqlstate="22012"),
    ]
    run_id = uuid4()
    with capture_logs() as logs:
        _log(BatchCommitted(run_id, batch(expired=10, failures=failures)))

    items = [entry for entry in logs if entry["event"] == "item.failed"]
    assert len(items) == len(failures)
    for entry, item in zip(items, failures, strict=True):
        assert entry["log_level"] == "error"
        assert entry["slot_id"] == str(item.slot.id)
        assert entry["tenant_id"] == str(item.slot.tenant_id)
        assert entry["sqlstate"] == item.sqlstate
        assert entry["exception"] == "slot refuses to expire"
        assert entry["run_id"] == str(run_id)
        assert entry["attempts"] == item.attempts
        assert entry["next_attempt_at"] == NEXT_ATTEMPT.isoformat()


def test_a_megabyte_rejection_is_logged_in_500_characters_its_length_noted() -> None:
    """A trigger may refuse a row with a message of any size: the line carries what the
    history and the quarantine keep of it, never the whole."""
    huge = replace(failure(), message="slot refuses to expire: " + "x" * 1_000_000)
    with capture_logs() as logs:
        _log(BatchCommitted(uuid4(), batch(failures=[huge] * 3)))

    items = [entry for entry in logs if entry["event"] == "item.failed"]
    assert len(items) == 3
    for entry in items:
        assert len(entry["exception"]) == MAX_MESSAGE_CHARS
        assert entry["exception"].startswith("slot refuses to expire: xxx")
        assert entry["exception"].endswith("\u2026 (1000024 characters)")


def test_a_cycle_failed_on_a_megabyte_message_logs_500_characters_of_it() -> None:
    error = TransientStoreError("server says: " + "y" * 1_000_000, "XX000")
    with capture_logs() as logs:
        _log(ended(CycleOutcome.FAILED, error))

    logged = _only(logs, "cycle.failed")["exception"]
    assert len(logged) == MAX_MESSAGE_CHARS
    assert logged.endswith("\u2026 (1000013 characters)")


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
    event = ended(outcome, error)
    with capture_logs() as logs:
        _log(event)

    entry = _only(logs, "cycle.failed")
    assert entry["log_level"] == "error"
    assert (entry["reason"], entry["sqlstate"]) == (outcome.value, sqlstate)
    assert entry["run_id"] == str(event.run_id)
    assert entry["error_type"] == type(error).__name__
    assert entry["exception"] == (str(error) or type(error).__name__)


def test_cycle_failed_with_an_empty_message_logs_the_error_type_instead() -> None:
    with capture_logs() as logs:
        _log(ended(CycleOutcome.BUDGET_EXCEEDED, TimeoutError()))

    assert _only(logs, "cycle.failed")["exception"] == "TimeoutError"


@pytest.mark.parametrize("outcome", list(CycleOutcome))
def test_every_outcome_is_logged_at_its_own_log_level(outcome: CycleOutcome) -> None:
    error = None if outcome is CycleOutcome.SUCCESS else RuntimeError("why")
    with capture_logs() as logs:
        _log(CycleEnded(cycle_result(outcome=outcome), error))

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
        CycleEnded(cycle_result(expired=1)),
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
