"""One cycle: expire one batch of past Available slots, isolating poison rows."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from uuid import UUID

from slot_expiration.cycle.result import CycleResult, ItemFailure
from slot_expiration.domain import SlotRef
from slot_expiration.store import LockedBatch, RowRejectedError, SlotStore

StoreFactory = Callable[[], AbstractAsyncContextManager[SlotStore]]


class ExpiryCycle:
    """Runs the spec's "One cycle" on a fresh store session.

    The healthy path is one set-based statement. When the database rejects a
    row, that attempt is rolled back whole and the batch is expired again row
    by row, each in a savepoint, so only the rejected rows are left out.
    Infrastructure errors propagate: the batch rolls back whole.
    """

    def __init__(
        self,
        open_store: StoreFactory,
        batch_size: int,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._open_store = open_store
        self._batch_size = batch_size
        self._monotonic = monotonic

    async def run(self, run_id: UUID, as_of: datetime) -> CycleResult:
        started = self._monotonic()
        failures: tuple[ItemFailure, ...] = ()
        async with self._open_store() as store:
            try:
                async with store.transaction():
                    batch = await store.expire_batch(as_of, self._batch_size)
                expired = batch.slots
            except RowRejectedError:
                batch, expired, failures = await self._expire_row_by_row(store, as_of)
        return CycleResult(
            run_id=run_id,
            as_of=as_of,
            expired=expired,
            skipped_locked_count=batch.skipped_locked_count,
            failures=failures,
            duration_ms=(self._monotonic() - started) * 1000.0,
        )

    async def _expire_row_by_row(
        self, store: SlotStore, as_of: datetime
    ) -> tuple[LockedBatch, tuple[SlotRef, ...], tuple[ItemFailure, ...]]:
        """Expire the batch row by row; rejected rows are left out and the batch is
        topped up past them, so a run of poison rows at the head of the backlog
        cannot hold back the rows behind it (at most 2 x batch_size rows tried)."""
        expired: list[SlotRef] = []
        failures: list[ItemFailure] = []
        tried: list[UUID] = []
        async with store.transaction():
            await store.check_constraints_immediately()
            while True:
                want = min(self._batch_size - len(expired), 2 * self._batch_size - len(tried))
                batch = await store.lock_batch(as_of, want, exclude_ids=tried)
                tried.extend(slot.id for slot in batch.slots)
                rejected = await _expire_each(store, batch, as_of, expired, failures)
                if not rejected or len(batch.slots) < want or len(tried) >= 2 * self._batch_size:
                    return batch, tuple(expired), tuple(failures)


async def _expire_each(
    store: SlotStore,
    batch: LockedBatch,
    as_of: datetime,
    expired: list[SlotRef],
    failures: list[ItemFailure],
) -> int:
    """Expire each locked slot in its own savepoint; returns how many were rejected."""
    rejected = 0
    for slot in batch.slots:
        try:
            if await store.expire_slot(slot.id, as_of):
                expired.append(slot)
        except RowRejectedError as exc:
            failures.append(ItemFailure(slot=slot, sqlstate=exc.sqlstate, message=str(exc)))
            rejected += 1
    return rejected
