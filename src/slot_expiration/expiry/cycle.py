"""One cycle: expire past Available slots in one batch (or, draining, several),
isolating and quarantining poison rows."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, suppress
from dataclasses import dataclass
from datetime import datetime
from typing import Final
from uuid import UUID

from slot_expiration.db import CommittedThenCancelled, RowRejectedError, StoreError
from slot_expiration.domain import CycleOutcome, utc_now
from slot_expiration.expiry.drain import DRAIN_COUNT_CAP, DrainWatch
from slot_expiration.expiry.events import (
    BacklogMeasured,
    BatchCommitted,
    BatchStarted,
    ClockCompared,
    DrainStarted,
    DrainThrottled,
    PauseChecked,
    ReplicaLagRead,
    StandbysNotJudged,
)
from slot_expiration.expiry.failure import ClockSkewError
from slot_expiration.expiry.limits import CycleLimits
from slot_expiration.expiry.result import (
    BACKLOG_COUNT_CAP,
    BatchResult,
    CycleResult,
    StopReason,
)
from slot_expiration.expiry.row_by_row import RowByRow, RowByRowOutcome
from slot_expiration.expiry.run import CycleRun
from slot_expiration.expiry.store import (
    CycleStore,
    LockedBatch,
    Position,
    Selection,
)
from slot_expiration.expiry.throttle import (
    REPLICA_POLL_SECONDS,
    LatencyWatch,
    ReplicaWatch,
    StandbysUnseen,
    ThrottleReason,
    nice_rest_seconds,
)

SLOT_TABLE = "availability_slots"

StoreFactory = Callable[[], AbstractAsyncContextManager[CycleStore]]
Record = Callable[[BatchResult], None]


@dataclass(frozen=True, slots=True)
class _Pending:
    """A batch under way: its number in the cycle, when it started (monotonic), what it
    selects, and how to record it once it committed."""

    number: int
    started: float
    selection: Selection
    record: Record


class ExpiryCycle:
    """Runs the spec's "One cycle" on a fresh store session.

    It first compares the worker's clock with the database's and checks that
    the role has what a cycle needs; a fast clock or a missing grant refuses
    the cycle before anything is locked. Then it reads the pause in force: a
    paused cycle runs no batch (outcome `paused`). Each batch is its own transaction.
    The healthy path is one set-based statement; when the database rejects a
    row, that attempt is rolled back whole and the batch is expired again row
    by row (RowByRow), so only the rejected rows are left out, and they are
    quarantined for a while. Infrastructure errors propagate: the batch in
    flight rolls back whole, batches already committed stay committed (and
    were reported). A cancellation is delivered once the COMMIT or ROLLBACK
    in flight has finished; nothing new starts after it.
    """

    def __init__(
        self,
        open_store: StoreFactory,
        limits: CycleLimits,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._open_store = open_store
        self._limits = limits
        # What the standbys showed, across this worker's cycles (a stalled replay's time).
        self._standbys = ReplicaWatch()
        self._latency = LatencyWatch()  # the drain's batch times, across its cycles
        self._blind_run: UUID | None = None  # the cycle that found it cannot see the standbys
        self._standbys_fine_at: float | None = None  # when they were last read within limits
        self._monotonic = monotonic
        self._clock = clock

    async def run(self, run: CycleRun) -> CycleResult:
        """The cycle; what it does goes to `run.progress` as it goes, so a failure (raised
        as is: a store error, a clock ahead) still leaves what committed there."""
        started = self._monotonic()
        async with self._open_store() as store:
            try:
                if await self._preflight(store, run):
                    return await self._paused(store, run, started)
                reason = await self._batches(store, run)
            except (StoreError, ClockSkewError):
                await self._measure_backlog_after_failure(store, run)
                raise
            # Once a stop was asked for, nothing new starts: not even the tail.
            if not run.stop_requested():
                await self._tail(store, run)
        return run.progress.result(CycleOutcome.SUCCESS, self._ms_since(started), reason)

    async def _preflight(self, store: CycleStore, run: CycleRun) -> bool:
        """Check the table meant, compare the clocks and check what the role lacks, then read
        the pause in force: whether the cycle is paused. (A paused replica still says what
        a person must fix before it could resume.)"""
        async with store.transaction():
            await store.verify_slot_table()
            before = self._clock()
            preflight = await store.preflight()
            after = self._clock()
            skew = ((before - preflight.server_clock) + (after - preflight.server_clock)) / 2
            run.progress.clock_skew_seconds = skew.total_seconds()
            run.emit(ClockCompared(run.run_id, skew.total_seconds()))
            if skew.total_seconds() > self._limits.max_clock_skew_seconds:
                raise ClockSkewError(skew.total_seconds(), self._limits.max_clock_skew_seconds)
            if preflight.lacks.problems:
                raise preflight.lacks.error()
            pause = await store.pause.current()
        run.progress.pause = pause
        run.emit(PauseChecked(run.run_id, pause, preflight.server_clock))
        return pause is not None

    async def _paused(self, store: CycleStore, run: CycleRun, started: float) -> CycleResult:
        """The pause in force holds: no batch, no tail, nothing written. The backlog is
        still counted (it grows while paused: the gauges and the page say by how much);
        a count that fails leaves the cycle paused all the same."""
        if not run.stop_requested():
            with suppress(StoreError):
                await self._backlog(store, run)
        return run.progress.result(CycleOutcome.PAUSED, self._ms_since(started))

    async def _tail(self, store: CycleStore, run: CycleRun) -> None:
        """After the batches: the quarantine's entries whose slot left Available end (this
        cycle expired it, or the calendar booked or archived it), those that ended past
        the retention go, then what is left is counted."""
        async with store.transaction():
            now = self._clock()
            await store.quarantine.end_departed(now)
            await store.quarantine.purge_ended(now - self._limits.quarantine_retention)
        await self._backlog(store, run)

    async def _backlog(self, store: CycleStore, run: CycleRun) -> None:
        """Count what is left, then the quarantine: once per cycle, in one short
        read-only transaction."""
        async with store.transaction():
            at = None if run.as_of_is_now else run.as_of
            backlog = await store.count_backlog_capped(at, BACKLOG_COUNT_CAP)
            quarantine = await store.quarantine.measure(self._clock())
        run.progress.backlog = backlog
        run.emit(
            BacklogMeasured(
                run.run_id, backlog, quarantine.quarantined, quarantine.oldest_age_seconds
            )
        )

    async def _measure_backlog_after_failure(self, store: CycleStore, run: CycleRun) -> None:
        """The backlog and quarantine gauges stay true while cycles fail (a role that may
        read but not write, say); if even counting fails, the cycle's own error is what
        matters."""
        if not run.stop_requested():
            with suppress(StoreError):
                await self._backlog(store, run)

    async def _batches(self, store: CycleStore, run: CycleRun) -> StopReason:
        pace = _Pace()
        drain = await self._drain_started(store, run)

        def record(batch: BatchResult) -> None:
            run.progress.add(batch)
            progress = None if drain is None else drain.progress(run.progress.expired_count)
            run.emit(BatchCommitted(run.run_id, batch, progress))

        after: Position | None = None  # where the previous batch's window ended
        while True:
            if not await self._standbys_allow_a_batch(store, run):
                return StopReason.STOP_REQUESTED if run.stop_requested() else StopReason.THROTTLED
            number = run.progress.batch_started()
            run.emit(BatchStarted(run.run_id, number))
            size = self._limits.size_of_batch(number)
            selection = Selection(run.as_of, self._clock(), size, after)
            pending = _Pending(number, self._monotonic(), selection, record)
            batch = await self._batch(store, run, pending)
            if batch is None:  # rejected once a stop was asked for: rolled back, not retried
                run.progress.batch_in_flight = False
                return StopReason.STOP_REQUESTED
            after = batch.window_end
            pace.add(batch.duration_ms / 1000.0, size)
            ahead = pace.expected_seconds(self._limits.size_of_batch(number + 1))
            if (reason := self._stop_reason(run, batch, ahead)) is not None:
                return reason
            await self._rest(run, batch, size)
            if run.stop_requested():
                return StopReason.STOP_REQUESTED

    async def _rest(self, run: CycleRun, batch: BatchResult, size: int) -> None:
        """After a batch of `size` rows asked for that leaves more to do: the fixed pause,
        the nice rest in proportion to the batch's time, and the rest a batch slower than
        the drain's baseline calls for (throttle.py)."""
        seconds = batch.duration_ms / 1000.0
        rests = {
            ThrottleReason.NICE: nice_rest_seconds(seconds, self._limits.drain_nice_ratio),
            ThrottleReason.LOAD: self._latency.rest_seconds(
                seconds, size, self._limits.drain_max_slowdown
            ),
        }
        for reason, rest in rests.items():
            if rest > 0:
                run.emit(DrainThrottled(run.run_id, reason, rest))
                run.progress.throttled(reason, rest)
        if (pause := self._limits.batch_pause_seconds + sum(rests.values())) > 0:
            await run.pause(pause)

    async def _standbys_allow_a_batch(self, store: CycleStore, run: CycleRun) -> bool:
        """Before each batch (the first of a cycle too: a standby stalled for hours must
        not take a batch per tick): False while a streaming standby is further behind
        than allowed and the budget runs out, or a stop is asked for. While held, the
        standbys are read again every REPLICA_POLL_SECONDS, each wait an event. Where
        they cannot be seen, the cycle goes on without looking again (nor failing a
        statement per batch in the server's log)."""
        if self._limits.max_replica_lag_seconds <= 0 or run.run_id == self._blind_run:
            return True
        if self._standbys_fine_at is not None and (
            self._monotonic() - self._standbys_fine_at < REPLICA_POLL_SECONDS
        ):
            # Read fine a moment ago: a drain of small quick batches does not pay a round
            # trip per batch for a lag that cannot have grown past the limit since.
            return True
        self._standbys_fine_at = None
        while not run.stop_requested():
            standbys = await store.standbys()
            lag = (
                None
                if standbys is None
                else self._standbys.lag_seconds(standbys, self._monotonic())
            )
            if standbys is None or lag is None:
                self._blind_run = run.run_id
                why = StandbysUnseen.NOT_GRANTED if standbys is None else StandbysUnseen.OWNER_BLIND
                run.emit(StandbysNotJudged(run.run_id, why))
                return True
            run.emit(ReplicaLagRead(run.run_id, lag))
            if lag <= self._limits.max_replica_lag_seconds:
                self._standbys_fine_at = self._monotonic()
                return True
            wait = REPLICA_POLL_SECONDS
            if run.deadline is not None:
                left = run.deadline - self._monotonic()
                if left <= 0:
                    return False
                wait = min(wait, left)
            run.emit(DrainThrottled(run.run_id, ThrottleReason.REPLICA_LAG, wait, lag))
            run.progress.throttled(ThrottleReason.REPLICA_LAG, wait)
            await run.pause(wait)
        return False

    async def _drain_started(self, store: CycleStore, run: CycleRun) -> DrainWatch | None:
        """A drain first counts the rows due at its as_of (up to DRAIN_COUNT_CAP): what its
        progress's rate and ETA are read against. A cycle of one batch counts nothing."""
        if self._limits.max_batches == 1:
            return None
        async with store.transaction():
            backlog = await store.count_backlog_capped(run.as_of, DRAIN_COUNT_CAP)
        run.emit(DrainStarted(run.run_id, backlog))
        return DrainWatch(backlog, self._monotonic)

    def _stop_reason(
        self, run: CycleRun, batch: BatchResult, next_batch_seconds: float
    ) -> StopReason | None:
        if batch.exhausted:
            return StopReason.DRAINED
        if self._limits.max_batches and batch.number >= self._limits.max_batches:
            return StopReason.MAX_BATCHES
        if run.stop_requested():
            return StopReason.STOP_REQUESTED
        # Another batch only if the pause and twice its likely time (at the slowest rate per
        # row so far, for its size) still fit.
        ahead = self._limits.batch_pause_seconds + 2 * next_batch_seconds
        if run.deadline is not None and self._monotonic() + ahead > run.deadline:
            return StopReason.BUDGET
        return None

    async def _batch(
        self, store: CycleStore, run: CycleRun, pending: _Pending
    ) -> BatchResult | None:
        """One batch, recorded once it committed (even if a cancel came during COMMIT);
        None when the database rejected it after a stop was asked for: the row-by-row
        retry is new work, left with the rejected rows to the next cycle.

        It starts where the drain's previous batch ended (`pending.selection.after`):
        rows that batch passed over (locked) or rejected are left to the next cycle,
        and neither its pick nor its skipped-row count walks the entries earlier
        batches expired.
        """
        try:
            locked = await store.expire_batch(pending.selection)
        except RowRejectedError:
            if run.stop_requested():
                return None
            return await self._row_by_row(store, run, pending)
        except CommittedThenCancelled as cancel:
            pending.record(self._fast(pending, cancel.result))
            raise
        batch = self._fast(pending, locked)
        pending.record(batch)
        return batch

    def _fast(self, pending: _Pending, locked: LockedBatch) -> BatchResult:
        return BatchResult(
            number=pending.number,
            expired_count=locked.count,
            failures=(),
            skipped_locked_count=locked.skipped_locked_count,
            duration_ms=self._ms_since(pending.started),
            exhausted=locked.window_end is None,
            window_end=locked.window_end,
        )

    async def _row_by_row(self, store: CycleStore, run: CycleRun, pending: _Pending) -> BatchResult:
        slow = RowByRow(store, store.quarantine, self._limits.backoff, self._monotonic)
        try:
            outcome = await slow.run(pending.selection, self._top_up_until(run))
        except asyncio.CancelledError:
            if slow.committed is not None:
                pending.record(self._slow(pending, slow.committed))
            raise
        batch = self._slow(pending, outcome)
        pending.record(batch)
        return batch

    def _slow(self, pending: _Pending, outcome: RowByRowOutcome) -> BatchResult:
        return BatchResult(
            number=pending.number,
            expired_count=outcome.expired_count,
            failures=outcome.failures,
            skipped_locked_count=outcome.skipped_locked_count,
            duration_ms=self._ms_since(pending.started),
            exhausted=outcome.exhausted,
            window_end=outcome.window_end,
        )

    def _top_up_until(self, run: CycleRun) -> float | None:
        """Topping a batch up past poison rows may take half of what is left of the
        budget: the rest is for committing it and the batches after."""
        if run.deadline is None:
            return None
        now = self._monotonic()
        return now + max(run.deadline - now, 0.0) / 2

    def _ms_since(self, started: float) -> float:
        return (self._monotonic() - started) * 1000.0


# Below this many rows, a batch's time is counted as this many rows' (see _Pace).
RATE_SAMPLE_ROWS: Final = 100


@dataclass(slots=True)
class _Pace:
    """How long the next batch of a drain will likely take, from the batches so far.

    A batch's time is a fixed part (its round trips, its commit) and a part per row.
    From a batch of a few rows the fixed part dominates: scaled row for row to a drain's
    2,000-row batch, a 3-row batch of 30 ms on a loaded machine predicted 40 s and
    stopped the drain after its first batch. So a batch of fewer than RATE_SAMPLE_ROWS
    rows counts as that many rows' time, and the next batch is expected to take at
    least as long as the slowest so far.
    """

    slowest_seconds: float = 0.0
    slowest_per_row: float = 0.0

    def add(self, seconds: float, size: int) -> None:
        self.slowest_seconds = max(self.slowest_seconds, seconds)
        self.slowest_per_row = max(self.slowest_per_row, seconds / max(size, RATE_SAMPLE_ROWS))

    def expected_seconds(self, size: int) -> float:
        return max(self.slowest_seconds, self.slowest_per_row * size)
