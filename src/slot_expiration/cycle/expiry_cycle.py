"""One cycle: expire past Available slots in one batch (or, draining, several),
isolating and quarantining poison rows."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime

from slot_expiration.cycle.limits import CycleLimits
from slot_expiration.cycle.result import (
    BACKLOG_COUNT_CAP,
    BatchResult,
    CycleResult,
    CycleTally,
    StopReason,
)
from slot_expiration.cycle.row_by_row import RowByRow
from slot_expiration.cycle.run import CycleRun
from slot_expiration.domain import utc_now
from slot_expiration.store import RowRejectedError, SlotStore

StoreFactory = Callable[[], AbstractAsyncContextManager[SlotStore]]


class ExpiryCycle:
    """Runs the spec's "One cycle" on a fresh store session.

    Each batch is its own transaction. The healthy path is one set-based
    statement; when the database rejects a row, that attempt is rolled back
    whole and the batch is expired again row by row (RowByRow), so only the
    rejected rows are left out, and they are quarantined for a while.
    Infrastructure errors propagate: the batch in flight rolls back whole,
    batches already committed stay committed (and were reported).
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
        self._monotonic = monotonic
        self._clock = clock

    async def run(self, run: CycleRun) -> CycleResult:
        started = self._monotonic()
        tally = CycleTally(run.run_id, run.as_of)
        async with self._open_store() as store:
            async with store.transaction():
                await store.purge_quarantine()
            reason = await self._batches(store, run, tally)
            async with store.transaction():
                backlog = await store.count_backlog_capped(run.as_of, BACKLOG_COUNT_CAP)
        return tally.result(self._ms_since(started), reason, backlog)

    async def _batches(self, store: SlotStore, run: CycleRun, tally: CycleTally) -> StopReason:
        longest_seconds = 0.0
        while True:
            number = tally.batches + 1
            run.observer.batch_started(run.run_id, number)
            batch = await self._batch(store, run, number)
            tally.add(batch)
            run.observer.batch_completed(run.run_id, batch)
            longest_seconds = max(longest_seconds, batch.duration_ms / 1000.0)
            if (reason := self._stop_reason(run, batch, longest_seconds)) is not None:
                return reason
            if self._limits.batch_pause_seconds > 0:
                await run.pause(self._limits.batch_pause_seconds)
                if run.stop_requested():
                    return StopReason.STOP_REQUESTED

    def _stop_reason(
        self, run: CycleRun, batch: BatchResult, longest_seconds: float
    ) -> StopReason | None:
        if batch.exhausted:
            return StopReason.DRAINED
        if self._limits.max_batches and batch.number >= self._limits.max_batches:
            return StopReason.MAX_BATCHES
        if run.stop_requested():
            return StopReason.STOP_REQUESTED
        # Another batch only if the pause and twice the slowest batch so far still fit.
        ahead = self._limits.batch_pause_seconds + 2 * longest_seconds
        if run.deadline is not None and self._monotonic() + ahead > run.deadline:
            return StopReason.BUDGET
        return None

    async def _batch(self, store: SlotStore, run: CycleRun, number: int) -> BatchResult:
        started, now = self._monotonic(), self._clock()
        size = self._limits.batch_size
        try:
            async with store.transaction():
                locked = await store.expire_batch(run.as_of, now, size)
        except RowRejectedError:
            slow = RowByRow(store, self._limits, self._monotonic)
            outcome = await slow.run(run.as_of, now, self._top_up_until(run))
            return BatchResult(
                number=number,
                expired=outcome.expired,
                failures=outcome.failures,
                skipped_locked_count=outcome.skipped_locked_count,
                duration_ms=self._ms_since(started),
                exhausted=outcome.exhausted,
            )
        return BatchResult(
            number=number,
            expired=locked.slots,
            failures=(),
            skipped_locked_count=locked.skipped_locked_count,
            duration_ms=self._ms_since(started),
            exhausted=len(locked.slots) < size,
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
