"""The log sink: stable event names, one event per fact, never one per expired slot."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import pytest
from structlog.testing import capture_logs

from slot_expiration.cycle import BatchResult, ClockSkewError, CycleResult, ItemFailure, StopReason
from slot_expiration.domain import SlotRef
from slot_expiration.store import MisconfiguredStoreError, TransientStoreError
from slot_expiration.telemetry import CycleHooks, Event, FanOutHooks, LogHooks

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
) -> CycleResult:
    return CycleResult(
        run_id=uuid4(),
        as_of=AS_OF,
        batches=batches,
        expired_count=expired,
        skipped_locked_count=skipped_locked,
        failed_count=failed,
        failed_sample=_slots(min(failed, 10)),
        duration_ms=duration_ms,
        stop_reason=StopReason.DRAINED,
    )


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


def test_event_names_are_the_stable_contract() -> None:
    assert (
        Event.CYCLE_STARTED,
        Event.BATCH_SELECTED,
        Event.ITEM_FAILED,
        Event.CYCLE_COMPLETED,
        Event.CYCLE_FAILED,
        Event.TICK_SKIPPED,
        Event.WORKER_STARTED,
        Event.WORKER_STOPPING,
        Event.WORKER_STOPPED,
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


def test_every_hook_logs_its_stable_event_name() -> None:
    with capture_logs() as logs:
        hooks = LogHooks()
        hooks.loop_started(interval_seconds=300.0, batch_size=500)
        hooks.cycle_started(uuid4(), AS_OF)
        hooks.batch_started(uuid4(), 1)
        hooks.batch_completed(uuid4(), _batch(expired=2, failures=[_failure()]))
        hooks.cycle_completed(_result(expired=2, failed=1))
        hooks.cycle_failed(uuid4(), RuntimeError("connection lost"), budget_exceeded=False)
        hooks.tick_skipped(1)
        hooks.loop_stopping(cycle_in_flight=False)
        hooks.loop_stopped()

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
        LogHooks().cycle_started(run_id, AS_OF)

    entry = _only(logs, "cycle.started")
    assert entry["run_id"] == str(run_id)
    assert entry["as_of"] == AS_OF.isoformat()
    assert entry["log_level"] == "info"


def test_cycle_completed_carries_expired_skipped_locked_and_duration_ms() -> None:
    result = _result(expired=3, skipped_locked=4, duration_ms=12.3456, batches=2)
    with capture_logs() as logs:
        LogHooks().cycle_completed(result)

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
        LogHooks().batch_completed(run_id, _batch(expired=5, failures=[_failure(), _failure()]))

    entry = _only(logs, "batch.selected")
    assert (entry["count"], entry["batch"], entry["run_id"]) == (7, 1, str(run_id))


def test_a_batch_of_500_expired_slots_logs_one_batch_selected_and_no_per_slot_event() -> None:
    batch = _batch(expired=500)
    with capture_logs() as logs:
        hooks = LogHooks()
        hooks.batch_started(uuid4(), 1)
        hooks.batch_completed(uuid4(), batch)

    assert _events(logs) == ["batch.selected"]
    assert all(str(slot.id) not in repr(logs) for slot in batch.expired)


def test_each_failed_item_is_logged_once_at_error_with_its_slot_id_and_sqlstate() -> None:
    failures = [_failure("23514"), _failure("P0001", attempts=3), _failure("22012")]
    run_id = uuid4()
    with capture_logs() as logs:
        LogHooks().batch_completed(run_id, _batch(expired=10, failures=failures))

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
    ("budget_exceeded", "reason"), [(True, "budget_exceeded"), (False, "error")]
)
def test_cycle_failed_names_the_reason_budget_exceeded_or_error(
    budget_exceeded: bool, reason: str
) -> None:
    run_id = uuid4()
    with capture_logs() as logs:
        LogHooks().cycle_failed(
            run_id, TimeoutError("ran past its budget"), budget_exceeded=budget_exceeded
        )

    entry = _only(logs, "cycle.failed")
    assert entry["log_level"] == "error"
    assert entry["reason"] == reason
    assert entry["run_id"] == str(run_id)
    assert entry["error_type"] == "TimeoutError"
    assert entry["exception"] == "ran past its budget"


@pytest.mark.parametrize(
    ("error", "reason", "error_class", "sqlstate"),
    [
        (MisconfiguredStoreError("permission denied for table x", "42501"),
         "misconfigured", "misconfigured", "42501"),
        (ClockSkewError(7_200.0, 30.0), "clock_skew", "clock_skew", None),
        (TransientStoreError("terminating connection", "57P01"), "error", "transient", "57P01"),
    ],
)  # fmt: skip
def test_cycle_failed_carries_the_reason_the_error_class_and_the_sqlstate(
    error: Exception, reason: str, error_class: str, sqlstate: str | None
) -> None:
    with capture_logs() as logs:
        LogHooks().cycle_failed(uuid4(), error, budget_exceeded=False)

    entry = _only(logs, "cycle.failed")
    assert (entry["reason"], entry["error_class"], entry["sqlstate"]) == (
        reason, error_class, sqlstate,
    )  # fmt: skip


def test_cycle_failed_with_an_empty_message_logs_the_error_type_instead() -> None:
    with capture_logs() as logs:
        LogHooks().cycle_failed(uuid4(), TimeoutError(), budget_exceeded=True)

    assert _only(logs, "cycle.failed")["exception"] == "TimeoutError"


def test_tick_skipped_is_a_warning_with_the_running_total() -> None:
    with capture_logs() as logs:
        LogHooks().tick_skipped(3)

    entry = _only(logs, "tick.skipped")
    assert entry["log_level"] == "warning"
    assert entry["skipped_ticks_total"] == 3


def test_worker_lifecycle_events_carry_their_settings() -> None:
    with capture_logs() as logs:
        hooks = LogHooks()
        hooks.loop_started(interval_seconds=300.0, batch_size=500)
        hooks.loop_stopping(cycle_in_flight=True)
        hooks.loop_stopped()

    started = _only(logs, "worker.started")
    assert (started["interval_seconds"], started["batch_size"]) == (300.0, 500)
    assert _only(logs, "worker.stopping")["cycle_in_flight"] is True
    assert _only(logs, "worker.stopped")["log_level"] == "info"


# -- FanOutHooks ----------------------------------------------------------------------------


class CallLog:
    """A sink that records every call it gets, in order."""

    def __init__(self, calls: list[tuple[str, str, tuple[Any, ...]]], name: str) -> None:
        self._calls = calls
        self._name = name

    def _record(self, method: str, *args: Any) -> None:
        self._calls.append((self._name, method, args))

    def cycle_started(self, run_id: UUID, as_of: datetime) -> None:
        self._record("cycle_started", run_id, as_of)

    def batch_started(self, run_id: UUID, number: int) -> None:
        self._record("batch_started", run_id, number)

    def batch_completed(self, run_id: UUID, batch: BatchResult) -> None:
        self._record("batch_completed", run_id, batch)

    def cycle_completed(self, result: CycleResult) -> None:
        self._record("cycle_completed", result)

    def cycle_failed(self, run_id: UUID, error: BaseException, *, budget_exceeded: bool) -> None:
        self._record("cycle_failed", run_id, error, budget_exceeded)

    def tick_skipped(self, skipped_ticks_total: int) -> None:
        self._record("tick_skipped", skipped_ticks_total)

    def clock_compared(self, run_id: UUID, skew_seconds: float) -> None:
        self._record("clock_compared", run_id, skew_seconds)

    def backlog_measured(self, run_id: UUID, backlog: int) -> None:
        self._record("backlog_measured", run_id, backlog)

    def quarantine_measured(self, run_id: UUID, count: int) -> None:
        self._record("quarantine_measured", run_id, count)

    def loop_started(self, interval_seconds: float, batch_size: int) -> None:
        self._record("loop_started", interval_seconds, batch_size)

    def loop_stopping(self, cycle_in_flight: bool) -> None:
        self._record("loop_stopping", cycle_in_flight)

    def loop_stopped(self) -> None:
        self._record("loop_stopped")


def test_fan_out_hooks_passes_each_event_to_every_sink_in_order() -> None:
    calls: list[tuple[str, str, tuple[Any, ...]]] = []
    sinks: list[CycleHooks] = [CallLog(calls, "first"), CallLog(calls, "second")]
    hooks = FanOutHooks(sinks)
    run_id, result, error = uuid4(), _result(expired=1), RuntimeError("down")
    batch = _batch(expired=1)

    hooks.loop_started(300.0, 500)
    hooks.cycle_started(run_id, AS_OF)
    hooks.batch_started(run_id, 1)
    hooks.batch_completed(run_id, batch)
    hooks.backlog_measured(run_id, 7)
    hooks.quarantine_measured(run_id, 3)
    hooks.cycle_completed(result)
    hooks.cycle_failed(run_id, error, budget_exceeded=True)
    hooks.tick_skipped(2)
    hooks.loop_stopping(True)
    hooks.loop_stopped()

    expected = [
        ("loop_started", (300.0, 500)),
        ("cycle_started", (run_id, AS_OF)),
        ("batch_started", (run_id, 1)),
        ("batch_completed", (run_id, batch)),
        ("backlog_measured", (run_id, 7)),
        ("quarantine_measured", (run_id, 3)),
        ("cycle_completed", (result,)),
        ("cycle_failed", (run_id, error, True)),
        ("tick_skipped", (2,)),
        ("loop_stopping", (True,)),
        ("loop_stopped", ()),
    ]
    assert calls == [
        (sink, method, args) for method, args in expected for sink in ("first", "second")
    ]


def test_fan_out_hooks_to_log_hooks_writes_the_log_events() -> None:
    with capture_logs() as logs:
        FanOutHooks([LogHooks()]).tick_skipped(1)

    assert _events(logs) == ["tick.skipped"]
