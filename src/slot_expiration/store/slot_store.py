"""The worker's repository: one cycle's selection, expiry, preflight and counts.

It runs the named statements of queries.sql on a Session (session.py), which
translates the driver's errors, and turns rows into frozen values. The
quarantine's own statements are QuarantineStore's, on the same session.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Self
from uuid import UUID

from slot_expiration.domain import Slot, SlotRef, SlotStatus
from slot_expiration.store.quarantine_store import QuarantineStore
from slot_expiration.store.session import (
    ApplicationName,
    Session,
    SessionSettings,
    Transaction,
    TransactionLimits,
)

NO_IDS: tuple[UUID, ...] = ()


@dataclass(frozen=True, slots=True)
class LockedBatch:
    """What one selection took: the slots, oldest first, and the rows it passed over.

    `previous_attempts[i]` is how often `slots[i]` was rejected before (0 when it
    is not in quarantine; only the row-by-row path reads it).
    """

    slots: tuple[SlotRef, ...]
    skipped_locked_count: int
    previous_attempts: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Preflight:
    """The server's clock, the role, and what it lacks to run a cycle (empty: nothing)."""

    server_clock: datetime
    role: str
    problems: tuple[str, ...]


class SlotStore:
    """The worker's statements over `availability_slots`, on one session."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.quarantine = QuarantineStore(session)

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, database_url: str, limits: TransactionLimits, *, prepare: bool = False
    ) -> AsyncIterator[Self]:
        """A worker session (application_name slot-expiration) for one cycle or command."""
        settings = SessionSettings(ApplicationName.WORKER, limits=limits, prepare=prepare)
        async with Session.open(database_url, settings) as session:
            yield cls(session)

    def transaction(self) -> AbstractAsyncContextManager[Transaction]:
        """One batch: committed whole or rolled back whole (see Session.transaction)."""
        return self._session.transaction()

    async def preflight(self) -> Preflight:
        server_clock, role, problems = await self._session.row("cycle_preflight")
        return Preflight(server_clock=server_clock, role=role, problems=tuple(problems))

    async def schema_revision(self) -> str | None:
        """The migration the schema is at (the role reads the history table: a
        requirement the preflight checks)."""
        rows = await self._session.rows("schema_revision")
        return str(rows[0][0]) if rows else None

    async def expire_batch(self, as_of: datetime, now: datetime, batch_size: int) -> LockedBatch:
        """Lock and expire a batch in one statement; a rejected row fails it whole.

        Rows in quarantine until after `now` are passed over.
        """
        params = _selection(as_of, now, batch_size, NO_IDS)
        ids, tenant_ids, skipped = await self._session.row("expire_batch", params)
        return LockedBatch(slots=_slot_refs(ids, tenant_ids), skipped_locked_count=int(skipped))

    async def lock_batch(
        self, as_of: datetime, now: datetime, batch_size: int, exclude_ids: Sequence[UUID] = ()
    ) -> LockedBatch:
        """Lock a batch without changing it, for row-by-row expiry."""
        params = _selection(as_of, now, batch_size, exclude_ids)
        ids, tenant_ids, attempts, skipped = await self._session.row("lock_batch", params)
        return LockedBatch(
            slots=_slot_refs(ids, tenant_ids),
            skipped_locked_count=int(skipped),
            previous_attempts=tuple(int(a) for a in attempts),
        )

    async def check_constraints_immediately(self) -> None:
        """From here to the end of the transaction, no constraint waits for COMMIT."""
        await self._session.execute("check_constraints_immediately")

    async def expire_slot(self, slot_id: UUID, as_of: datetime) -> bool:
        """Expire one locked slot inside a savepoint, so a rejection spares the batch.

        Raises RowRejectedError carrying the slot id when the database refuses it.
        """
        async with self._session.savepoint(slot_id):
            rows = await self._session.rows("expire_slot", {"id": slot_id, "as_of": as_of})
        return bool(rows)

    async def insert_slots(self, slots: Iterable[Slot]) -> None:
        params = [asdict(slot) | {"status": slot.status.value} for slot in slots]
        await self._session.execute_many("insert_slot", params)

    async def count_by_status(self) -> dict[SlotStatus, int]:
        counts = dict.fromkeys(SlotStatus, 0)
        rows = await self._session.rows("count_by_status")
        counts.update({SlotStatus(status): count for status, count in rows})
        return counts

    async def count_backlog(self, as_of: datetime) -> int:
        return int(await self._session.value("count_backlog", {"as_of": as_of}))

    async def count_backlog_capped(self, as_of: datetime | None, cap: int) -> int:
        """Available rows due at `as_of` (None: the database's now), up to `cap` at most."""
        params = {"as_of": as_of, "cap": cap}
        return int(await self._session.value("count_backlog_capped", params))


def _selection(
    as_of: datetime, now: datetime, batch_size: int, exclude_ids: Sequence[UUID]
) -> dict[str, object]:
    """The parameters of the due-slot selection (queries.sql, pick_due_slots)."""
    return {"as_of": as_of, "now": now, "batch_size": batch_size, "exclude_ids": list(exclude_ids)}


def _slot_refs(ids: Sequence[UUID], tenant_ids: Sequence[UUID]) -> tuple[SlotRef, ...]:
    return tuple(SlotRef(id=i, tenant_id=t) for i, t in zip(ids, tenant_ids, strict=True))
