"""A drain's progress on a real PostgreSQL: the count it starts from, the rate and ETA each
batch's event and log line carry (on a clock the test moves), the last line's count of what
is left against the table itself, and the deployment's pace status reads from the history."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from structlog.testing import capture_logs

from slot_expiration.cli.worker_commands import stop_line
from slot_expiration.expiry import (
    BatchCommitted,
    BatchStarted,
    CycleRun,
    DrainProgress,
    DrainStarted,
    StopReason,
)
from slot_expiration.history.housekeeping import Housekeeping
from slot_expiration.history.store import HistoryStore
from slot_expiration.loop import Event, fan_out
from slot_expiration.options import CycleOptions, load_settings
from slot_expiration.status import collect_status, render_text
from slot_expiration.telemetry import LogEvent, LogSink
from tests.support.cycles import make_cycle
from tests.support.database import SlotDatabase
from tests.support.history import cycle_record
from tests.support.slots import AS_OF, DUE_BACKLOG, past_slots

pytestmark = pytest.mark.integration

_LIMITS = Housekeeping("postgresql://unused", timedelta(days=14)).limits


class SecondPerBatch:
    """A monotonic clock that moves one second as each batch starts, and never otherwise:
    the drain's figures are then known exactly."""

    def __init__(self) -> None:
        self.now = 100.0  # any monotonic clock's origin: the drain reads time since its count
        self.events: list[Event] = []

    def clock(self) -> float:
        return self.now

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, BatchStarted):
            self.now += 1.0

    def progress(self) -> list[DrainProgress | None]:
        return [e.drain for e in self.events if isinstance(e, BatchCommitted)]


async def test_a_drains_events_and_log_lines_carry_its_rate_eta_and_what_is_left(
    db: SlotDatabase,
) -> None:
    await db.insert(past_slots(30))
    paced = SecondPerBatch()
    cycle = make_cycle(db.url, batch_size=5, max_batches=0, monotonic=paced.clock)

    with capture_logs() as logs:
        result = await cycle.run(CycleRun(AS_OF, emit=fan_out(LogSink(), paced)))

    assert result.stop_reason is StopReason.DRAINED
    started = [e for e in paced.events if isinstance(e, DrainStarted)]
    assert [e.backlog for e in started] == [30]  # counted in the table before batch 1
    # Five rows a second: 25 left after the first second, 5 s to go; and so on.
    assert paced.progress() == [DrainProgress(30, 5 * n, float(n)) for n in range(1, 7)] + [
        DrainProgress(30, 30, 7.0)
    ]  # the seventh, empty, says the backlog is done
    assert [p.eta_seconds for p in paced.progress() if p is not None] == [
        5.0,
        4.0,
        3.0,
        2.0,
        1.0,
        0.0,
        0.0,
    ]
    lines = [entry for entry in logs if entry["event"] == LogEvent.BATCH_SELECTED]
    assert [(e["rows_per_second"], e["left"], e["eta_seconds"]) for e in lines[:3]] == [
        (5.0, 25, 5.0),
        (5.0, 20, 4.0),
        (5.0, 15, 3.0),
    ]
    (drain_line,) = [entry for entry in logs if entry["event"] == LogEvent.DRAIN_STARTED]
    assert (drain_line["backlog"], drain_line["backlog_capped"]) == (30, False)


async def test_a_cycle_of_one_batch_counts_nothing_first_and_its_batch_carries_no_drain(
    db: SlotDatabase,
) -> None:
    await db.insert(past_slots(30))
    paced = SecondPerBatch()

    await make_cycle(db.url, batch_size=5, max_batches=1).run(CycleRun(AS_OF, emit=paced))

    assert not [e for e in paced.events if isinstance(e, DrainStarted)]
    assert paced.progress() == [None]


def _settings(**given: object) -> CycleOptions:
    return load_settings(CycleOptions, environment=False, database_url="postgresql://x", **given)


async def test_the_last_line_of_a_drain_stopped_at_its_budget_says_what_is_left_in_the_table(
    db: SlotDatabase,
) -> None:
    await db.insert(past_slots(30))
    paced = SecondPerBatch()
    cycle = make_cycle(db.url, batch_size=5, max_batches=0, monotonic=paced.clock)

    # The budget runs out after the third batch (the clock reads 103, past the deadline).
    result = await cycle.run(CycleRun(AS_OF, emit=paced, deadline=102.5))

    assert (result.stop_reason, result.expired_count) == (StopReason.BUDGET, 15)
    left = await db.conn.execute(
        "SELECT count(*) FROM availability_slots WHERE status = 'Available' AND start_at <= %s",
        (AS_OF,),
    )
    assert (await left.fetchone()) == (15,)
    assert stop_line(result, _settings(max_cycle_seconds=30)) == (
        "stopped at the cycle budget (30 s): 15 left; run again or raise --max-cycle-seconds"
    )


async def test_the_last_line_of_a_drain_stopped_at_its_batch_limit_says_what_is_left(
    db: SlotDatabase,
) -> None:
    await db.insert(past_slots(30))

    result = await make_cycle(db.url, batch_size=5, max_batches=2).run(CycleRun(AS_OF))

    assert stop_line(result, _settings(max_batches_per_cycle=2)) == (
        "stopped at the batch limit (2 batches): 20 left; run again or raise "
        "--max-batches-per-cycle"
    )


async def test_status_reads_the_drains_rate_and_eta_from_the_history_and_its_backlog(
    db: SlotDatabase,
) -> None:
    now = datetime.now(UTC)
    await db.conn.execute(DUE_BACKLOG, {"now": now, "count": 3_000})
    # Three cycles a minute apart, 30 s each: 6,000 rows from the first one's start
    # (2 min 30 s ago) to the latest one's end (now): 40 rows/s.
    ends = {now - timedelta(minutes=2): 7_000, now - timedelta(minutes=1): 5_000, now: 3_000}
    cycles = [
        replace(
            cycle_record(end, expired=2_000, backlog=left),
            duration_ms=30_000.0,
            throttled_seconds=30.0,  # each held half its time by a standby
            throttled_by="replica_lag",
        )
        for end, left in ends.items()
    ]
    # Twenty minutes before: out of the pace's window (three of the default 5-minute
    # intervals), it counts for nothing; the backlog's trend reads it (coming down).
    cycles.append(cycle_record(now - timedelta(minutes=20), expired=99_000, backlog=9_000))
    async with HistoryStore.connect(db.url, _LIMITS) as store, store.transaction():
        for record in cycles:
            await store.record(record)

    report = await collect_status(db.url, batch_size=500)

    assert report.as_json()["drain"] == {
        "rows_per_second": 40.0,
        "eta_seconds": 75.0,
        "left": 3_000,
        "left_capped": False,
        "coming_down": True,
        "expired": 6_000,
        "seconds": 150.0,
        "window_seconds": 900.0,
        # 3 x 30 s of the 150 s from the first one's start to the latest one's end.
        "throttled_seconds": 90.0,
        "throttled_share": 0.6,
        "throttled_by": "replica_lag",
    }
    (line,) = [line for line in render_text(report).splitlines() if line.startswith("drain")]
    assert line.split(maxsplit=1)[1] == (
        "40 rows/s over the last 15m 0s, 3,000 left, ETA 1m 15s, throttled 60% by replica lag"
    )


async def test_status_gives_no_eta_while_the_backlog_is_not_coming_down(
    db: SlotDatabase,
) -> None:
    now = datetime.now(UTC)
    await db.conn.execute(DUE_BACKLOG, {"now": now, "count": 3_000})
    # Each cycle expires 2,000 and leaves 3,000: slots fall due as fast as they go.
    async with HistoryStore.connect(db.url, _LIMITS) as store, store.transaction():
        for minutes in (20, 10, 0):
            end = now - timedelta(minutes=minutes)
            await store.record(cycle_record(end, expired=2_000, backlog=3_000))

    report = await collect_status(db.url, batch_size=500)

    drain = report.as_json()["drain"]
    assert (drain["coming_down"], drain["eta_seconds"], drain["left"]) == (False, None, 3_000)
    (line,) = [line for line in render_text(report).splitlines() if line.startswith("drain")]
    assert line.endswith(
        "3,000 left, no ETA: the backlog is not coming down (slots fall due as fast)"
    )


async def test_status_says_no_drain_is_in_progress_when_nothing_is_due(db: SlotDatabase) -> None:
    now = datetime.now(UTC)
    async with HistoryStore.connect(db.url, _LIMITS) as store, store.transaction():
        await store.record(cycle_record(now, expired=2_000))

    report = await collect_status(db.url, batch_size=500)

    assert report.as_json()["drain"] is None
    (line,) = [line for line in render_text(report).splitlines() if line.startswith("drain")]
    assert line.split(maxsplit=1)[1] == "none: no Available slot has started"
