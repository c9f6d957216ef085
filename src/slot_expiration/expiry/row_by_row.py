"""The poison-isolation path of a batch: expire row by row, quarantine the rejected rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from uuid import UUID

from slot_expiration.db import RowRejectedError, Transaction
from slot_expiration.expiry.result import ItemFailure
from slot_expiration.expiry.store import CycleStore, LockedBatch, Position, Selection
from slot_expiration.quarantine.backoff import PoisonBackoff
from slot_expiration.quarantine.store import QuarantineEntry, QuarantineStore


@dataclass(slots=True)
class RowByRowOutcome:
    expired_count: int = 0
    failures: tuple[ItemFailure, ...] = ()
    skipped_locked_count: int = 0
    exhausted: bool = False
    window_end: Position | None = None


@dataclass(slots=True)
class _Progress:
    expired_count: int = 0
    failures: list[ItemFailure] = field(default_factory=list)
    tried: list[UUID] = field(default_factory=list)
    released: list[UUID] = field(default_factory=list)  # expired rows that were quarantined


class RowByRow:
    """One transaction: lock the batch, expire each row in its own savepoint, and top
    the batch up past rejected rows until it holds `batch_size` expired rows, the
    backlog is done, or `top_up_until` (monotonic) has passed. Rejected rows stay
    Available and are written to the quarantine in the same transaction, so the
    next selections pass over them until their next attempt."""

    def __init__(
        self,
        store: CycleStore,
        quarantine: QuarantineStore,
        backoff: PoisonBackoff,
        monotonic: Callable[[], float],
    ) -> None:
        self._store = store
        self._quarantine = quarantine
        self._backoff = backoff
        self._monotonic = monotonic
        # What the transaction committed, once the server confirmed it (also when a
        # cancellation came during COMMIT: the caller reports it, then stops).
        self.committed: RowByRowOutcome | None = None

    async def run(self, selection: Selection, top_up_until: float | None) -> RowByRowOutcome:
        progress = _Progress()
        transaction = Transaction()
        try:
            async with self._store.transaction() as transaction:
                await self._store.check_constraints_immediately()
                locked, want = await self._fill(progress, selection, top_up_until)
                entries = [_entry(failure) for failure in progress.failures]
                await self._quarantine.record(entries, selection.now)
                await self._quarantine.release(progress.released, selection.now)
                outcome = RowByRowOutcome(
                    expired_count=progress.expired_count,
                    failures=tuple(progress.failures),
                    # The last selection's window covers every row before it.
                    skipped_locked_count=locked.skipped_locked_count,
                    exhausted=len(locked.slots) < want,
                    window_end=locked.window_end,
                )
        finally:
            if transaction.committed:
                self.committed = outcome
        return outcome

    async def _fill(
        self, progress: _Progress, selection: Selection, top_up_until: float | None
    ) -> tuple[LockedBatch, int]:
        while True:
            want = selection.batch_size - progress.expired_count
            wanted = replace(selection, batch_size=want, exclude_ids=tuple(progress.tried))
            locked = await self._store.lock_batch(wanted)
            progress.tried.extend(slot.id for slot in locked.slots)
            rejected = await self._expire_each(progress, locked, selection.as_of, selection.now)
            out_of_time = top_up_until is not None and self._monotonic() >= top_up_until
            if not rejected or len(locked.slots) < want or out_of_time:
                return locked, want

    async def _expire_each(
        self, progress: _Progress, locked: LockedBatch, as_of: datetime, now: datetime
    ) -> int:
        """Expire each locked slot in its own savepoint; returns how many were rejected."""
        rejected = 0
        for slot, before in zip(locked.slots, locked.previous_attempts, strict=True):
            try:
                if await self._store.expire_slot(slot.id, as_of):
                    progress.expired_count += 1
                    if before:
                        progress.released.append(slot.id)
            except RowRejectedError as exc:
                attempts = before + 1
                progress.failures.append(
                    ItemFailure(
                        slot=slot,
                        sqlstate=str(exc.sqlstate),
                        message=str(exc),
                        attempts=attempts,
                        next_attempt_at=now + self._backoff.delay(attempts),
                    )
                )
                rejected += 1
        return rejected


def _entry(failure: ItemFailure) -> QuarantineEntry:
    assert failure.next_attempt_at is not None  # set by RowByRow for every failure
    return QuarantineEntry(
        slot_id=failure.slot.id,
        attempts=failure.attempts,
        next_attempt_at=failure.next_attempt_at,
        sqlstate=failure.sqlstate,
        message=failure.message,
    )
