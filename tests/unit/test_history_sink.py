"""The cycle history's sink: one record per cycle, how it ended, written off the loop."""

from __future__ import annotations

import asyncio
import socket
from datetime import datetime, timedelta
from uuid import uuid4

import pytest
from structlog.testing import capture_logs

from slot_expiration.db import MisconfiguredStoreError, TransientStoreError
from slot_expiration.domain import CycleOutcome
from slot_expiration.domain.text import MAX_MESSAGE_CHARS
from slot_expiration.expiry import (
    BatchCommitted,
    ClockSkewError,
    CycleEnded,
    CycleProgress,
    CycleStarted,
)
from slot_expiration.history.sink import HistorySink, default_instance
from slot_expiration.history.store import CycleRecord
from tests.support.results import AS_OF, FakeClock, batch, cycle_result, ended


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


def _sinks(written: Written, clock: FakeClock, timeout_seconds: float = 5.0) -> HistorySink:
    return HistorySink(
        written, "worker-a:7", clock=lambda: _wall(clock), timeout_seconds=timeout_seconds
    )


async def test_a_completed_cycle_is_one_success_record_with_its_counts() -> None:
    written, clock = Written(), FakeClock()
    recorded = _sinks(written, clock)
    result = cycle_result(expired=7, failed=1, backlog=12, duration_ms=250.0)

    clock.advance(0.25)
    recorded(CycleEnded(result))
    await recorded.drain()

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
    ("error", "outcome"),
    [
        (TransientStoreError("server closed the connection", "08006"), CycleOutcome.FAILED),
        (MisconfiguredStoreError("no UPDATE (status)", "42501"), CycleOutcome.MISCONFIGURED),
        (ClockSkewError(90.0, 30.0), CycleOutcome.CLOCK_SKEW),
        (TimeoutError("past its budget"), CycleOutcome.BUDGET_EXCEEDED),
        (asyncio.CancelledError("stopped"), CycleOutcome.INTERRUPTED),
    ],
)
async def test_a_failed_cycle_is_recorded_with_how_it_ended_and_what_committed_before(
    error: BaseException, outcome: CycleOutcome
) -> None:
    written, clock = Written(), FakeClock()
    recorded = _sinks(written, clock)
    progress = CycleProgress(uuid4(), AS_OF, AS_OF)  # as the cycle left it
    progress.clock_skew_seconds = 0.5
    progress.batch_started()
    progress.add(batch(expired=3, skipped_locked=2))
    progress.backlog = 40

    recorded(CycleEnded(progress.result(outcome, 1_500.0), error))
    await recorded.drain()

    (record,) = written.records
    assert (record.outcome, record.stop_reason) == (outcome, None)  # the outcome says why
    assert (record.expired_count, record.skipped_locked_count, record.batches) == (3, 2, 1)
    assert (record.backlog, record.clock_skew_seconds) == (40, 0.5)
    assert record.duration_ms == 1_500.0
    assert record.error_type == type(error).__name__
    assert record.error == str(error)
    assert record.sqlstate == getattr(error, "sqlstate", None)


async def test_a_long_error_message_is_cut_in_the_record_its_length_noted() -> None:
    written, clock = Written(), FakeClock()
    recorded = _sinks(written, clock)
    run_id = uuid4()

    recorded(ended(CycleOutcome.FAILED, TransientStoreError("x" * 5_000, "57P01"), run_id=run_id))
    await recorded.drain()

    error = written.records[0].error or ""
    assert len(error) == MAX_MESSAGE_CHARS
    assert error.startswith("xxx")
    assert error.endswith("… (5000 characters)")


async def test_the_record_is_on_the_databases_clock_whatever_the_workers() -> None:
    """A worker whose clock runs two hours slow (skew -7200 s, measured at the cycle's
    start) records its cycle at the database's time, not two hours in the past."""
    written, clock = Written(), FakeClock()
    recorded = _sinks(written, clock)
    progress = CycleProgress(uuid4(), AS_OF, AS_OF)
    progress.clock_skew_seconds = -7_200.0

    clock.advance(0.25)
    recorded(CycleEnded(progress.result(CycleOutcome.SUCCESS, 250.0)))
    await recorded.drain()

    (record,) = written.records
    assert record.started_at == AS_OF + timedelta(hours=2)
    assert record.ended_at == AS_OF + timedelta(hours=2, seconds=0.25)
    assert record.as_of == AS_OF  # the cycle's AsOf stays the worker's own


async def test_a_failed_write_is_logged_with_the_run_id_and_nothing_is_raised() -> None:
    written, clock = Written(TransientStoreError("connection refused", "08001")), FakeClock()
    recorded = _sinks(written, clock)
    result = cycle_result()

    with capture_logs() as logs:
        recorded(CycleEnded(result))
        await recorded.drain()

    (line,) = [entry for entry in logs if entry["event"] == "history.write_failed"]
    assert line["log_level"] == "warning"
    assert (line["run_id"], line["outcome"], line["sqlstate"]) == (
        str(result.run_id),
        "success",
        "08001",
    )


async def test_a_failed_write_logs_at_most_500_characters_of_its_message() -> None:
    refusal = TransientStoreError("refused: " + "x" * 1_000_000, "XX000")
    recorded = _sinks(Written(refusal), FakeClock())

    with capture_logs() as logs:
        recorded(CycleEnded(cycle_result()))
        await recorded.drain()

    (line,) = [entry for entry in logs if entry["event"] == "history.write_failed"]
    assert len(line["exception"]) <= MAX_MESSAGE_CHARS
    assert line["exception"].startswith("refused: xxx")
    assert line["exception"].endswith("\u2026 (1000009 characters)")


async def test_each_row_written_or_lost_is_told_with_why_it_was_lost() -> None:
    told: list[tuple[CycleOutcome, str | None]] = []
    refused = MisconfiguredStoreError('password authentication failed for user "w"', "28P01")
    for written in (Written(), Written(refused)):
        recorded = HistorySink(
            written, "a:1", on_written=lambda record, error: told.append((record.outcome, error))
        )
        recorded(CycleEnded(cycle_result()))
        await recorded.drain()

    assert told == [
        (CycleOutcome.SUCCESS, None),
        (CycleOutcome.SUCCESS, 'password authentication failed for user "w" (SQLSTATE 28P01)'),
    ]


async def test_a_write_that_never_answers_is_given_up_at_its_timeout() -> None:
    recorded = _sinks(Written(hang=True), FakeClock(), timeout_seconds=0.05)
    result = cycle_result()

    with capture_logs() as logs:
        recorded(CycleEnded(result))
        await recorded.drain()

    assert recorded.writing == 0
    assert [entry["error_type"] for entry in logs] == ["TimeoutError"]


async def test_the_loop_does_not_wait_for_the_write() -> None:
    recorded = _sinks(Written(hang=True), FakeClock())
    result = cycle_result()

    recorded(CycleEnded(result))  # returns at once: the write runs in a task of its own

    assert recorded.writing == 1
    await recorded.drain(timeout_seconds=0)
    assert recorded.writing == 0


async def test_only_the_end_of_a_cycle_writes_a_record() -> None:
    written = Written()
    recorded = _sinks(written, FakeClock())
    run_id = uuid4()

    recorded(CycleStarted(run_id, AS_OF))
    recorded(BatchCommitted(run_id, batch(expired=1)))
    await recorded.drain()

    assert written.records == []


def test_the_default_instance_is_the_host_name_and_a_suffix_unique_per_process() -> None:
    """Two containers run with --network=host share the host's name and are both pid 1:
    hostname:pid named them alike (`vm:1`)."""
    first, second = default_instance({}), default_instance({})

    assert first != second
    for name in (first, second):
        host, _, suffix = name.rpartition("-")
        assert host == socket.gethostname()
        assert len(suffix) == 6


def test_the_default_instance_is_the_pod_name_when_the_deployment_gives_it() -> None:
    assert default_instance({"POD_NAME": "slot-expiration-7d9f8-x2x4q"}) == (
        "slot-expiration-7d9f8-x2x4q"
    )
