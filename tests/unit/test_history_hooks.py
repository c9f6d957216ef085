"""The cycle history's sink: one record per cycle, how it ended, written off the loop."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from uuid import uuid4

import pytest
from structlog.testing import capture_logs

from slot_expiration.cycle import ClockSkewError, CycleCancelledError
from slot_expiration.loop import CycleBudgetExceededError
from slot_expiration.store import MisconfiguredStoreError, TransientStoreError
from slot_expiration.store.history_store import CycleOutcome, CycleRecord
from slot_expiration.telemetry.history import MAX_ERROR_CHARS, HistoryHooks, default_instance
from tests.support.results import AS_OF, FakeClock, batch, cycle_result


class Written:
    """A writer that keeps what it is given (or fails, or never answers)."""

    def __init__(self, failure: Exception | None = None, *, hang: bool = False) -> None:
        self.records: list[CycleRecord] = []
        self._failure = failure
        self._hang = hang

    async def __call__(self, record: CycleRecord) -> None:
        if self._hang:
            await asyncio.Event().wait()
        if self._failure is not None:
            raise self._failure
        self.records.append(record)


def _wall(clock: FakeClock) -> datetime:
    return AS_OF + timedelta(seconds=clock.now - 1_000.0)


def _hooks(written: Written, clock: FakeClock, timeout_seconds: float = 5.0) -> HistoryHooks:
    return HistoryHooks(
        written,
        "worker-a:7",
        clock=lambda: _wall(clock),
        monotonic=clock,
        timeout_seconds=timeout_seconds,
    )


async def test_a_completed_cycle_is_one_success_record_with_its_counts() -> None:
    written, clock = Written(), FakeClock()
    hooks = _hooks(written, clock)
    result = cycle_result(expired=7, failed=1, backlog=12, duration_ms=250.0)

    hooks.cycle_started(result.run_id, AS_OF)
    clock.advance(0.25)
    hooks.cycle_completed(result)
    await hooks.drain()

    (record,) = written.records
    assert (record.run_id, record.instance, record.outcome) == (
        result.run_id,
        "worker-a:7",
        CycleOutcome.SUCCESS,
    )
    assert (record.expired_count, record.failed_count, record.backlog) == (7, 1, 12)
    assert (record.started_at, record.ended_at) == (AS_OF, AS_OF + timedelta(seconds=0.25))
    assert (record.duration_ms, record.stop_reason) == (250.0, "drained")
    assert (record.error_type, record.sqlstate, record.error) == (None, None, None)


@pytest.mark.parametrize(
    ("error", "budget_exceeded", "outcome", "stop_reason"),
    [
        (TransientStoreError("server closed the connection", "08006"), False,
         CycleOutcome.FAILED, "failed"),
        (MisconfiguredStoreError("no UPDATE (status)", "42501"), False,
         CycleOutcome.MISCONFIGURED, "failed"),
        (ClockSkewError(90.0, 30.0), False, CycleOutcome.CLOCK_SKEW, "failed"),
        (CycleBudgetExceededError("past its budget", 30.0), True,
         CycleOutcome.BUDGET_EXCEEDED, "budget_exceeded"),
        (CycleCancelledError("stopped"), False, CycleOutcome.INTERRUPTED, "interrupted"),
    ],
)  # fmt: skip
async def test_a_failed_cycle_is_recorded_with_how_it_ended_and_what_committed_before(
    error: Exception, budget_exceeded: bool, outcome: CycleOutcome, stop_reason: str
) -> None:
    written, clock = Written(), FakeClock()
    hooks = _hooks(written, clock)
    run_id = uuid4()

    hooks.cycle_started(run_id, AS_OF)
    hooks.clock_compared(run_id, 0.5)
    hooks.batch_completed(run_id, batch(expired=3, skipped_locked=2))
    hooks.backlog_measured(run_id, 40)
    clock.advance(1.5)
    hooks.cycle_failed(run_id, error, budget_exceeded=budget_exceeded)
    await hooks.drain()

    (record,) = written.records
    assert (record.outcome, record.stop_reason) == (outcome, stop_reason)
    assert (record.expired_count, record.skipped_locked_count, record.batches) == (3, 2, 1)
    assert (record.backlog, record.clock_skew_seconds) == (40, 0.5)
    assert record.duration_ms == 1_500.0
    assert record.error_type == type(error).__name__
    assert record.error == str(error)
    assert record.sqlstate == getattr(error, "sqlstate", None)


async def test_a_long_error_message_is_cut_in_the_record() -> None:
    written, clock = Written(), FakeClock()
    hooks = _hooks(written, clock)
    run_id = uuid4()

    hooks.cycle_started(run_id, AS_OF)
    hooks.cycle_failed(run_id, TransientStoreError("x" * 5_000, "57P01"), budget_exceeded=False)
    await hooks.drain()

    assert len(written.records[0].error or "") == MAX_ERROR_CHARS


async def test_a_failed_write_is_logged_with_the_run_id_and_nothing_is_raised() -> None:
    written, clock = Written(TransientStoreError("connection refused", "08001")), FakeClock()
    hooks = _hooks(written, clock)
    result = cycle_result()

    with capture_logs() as logs:
        hooks.cycle_started(result.run_id, AS_OF)
        hooks.cycle_completed(result)
        await hooks.drain()

    (line,) = [entry for entry in logs if entry["event"] == "history.write_failed"]
    assert line["log_level"] == "warning"
    assert (line["run_id"], line["outcome"], line["sqlstate"]) == (
        str(result.run_id),
        "success",
        "08001",
    )


async def test_a_write_that_never_answers_is_given_up_at_its_timeout() -> None:
    hooks = _hooks(Written(hang=True), FakeClock(), timeout_seconds=0.05)
    result = cycle_result()

    with capture_logs() as logs:
        hooks.cycle_started(result.run_id, AS_OF)
        hooks.cycle_completed(result)
        await hooks.drain()

    assert hooks.writing == 0
    assert [entry["error_type"] for entry in logs] == ["TimeoutError"]


async def test_the_loop_does_not_wait_for_the_write() -> None:
    hooks = _hooks(Written(hang=True), FakeClock())
    result = cycle_result()

    hooks.cycle_started(result.run_id, AS_OF)
    hooks.cycle_completed(result)  # returns at once: the write runs in a task of its own

    assert hooks.writing == 1
    await hooks.drain(timeout_seconds=0)
    assert hooks.writing == 0


async def test_events_of_a_cycle_it_did_not_see_start_are_ignored() -> None:
    written = Written()
    hooks = _hooks(written, FakeClock())

    hooks.batch_completed(uuid4(), batch(expired=1))
    hooks.cycle_completed(cycle_result())
    await hooks.drain()

    assert written.records == []


def test_the_default_instance_is_the_host_and_the_process() -> None:
    host, _, pid = default_instance().rpartition(":")

    assert host
    assert pid.isdigit()
