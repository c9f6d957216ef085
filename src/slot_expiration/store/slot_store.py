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
from slot_expiration.store.schema_version import read_schema_revision
from slot_expiration.store.session import (
    ApplicationName,
    Session,
    SessionSettings,
    Transaction,
    TransactionLimits,
)

Position = tuple[datetime, UUID]  # a row's place in the selection's order: (start_at, id)


@dataclass(frozen=True, slots=True)
class Selection:
    """What a batch asks for: rows due at `as_of`, past `after` (where the drain's previous
    batch ended; None for a cycle's first), not in quarantine until after `now`, not in
    `exclude_ids` (rows this transaction tried already), at most `batch_size`."""

    as_of: datetime
    now: datetime
    batch_size: int
    after: Position | None = None
    exclude_ids: tuple[UUID, ...] = ()

    def parameters(self) -> dict[str, object]:
        """The parameters of the due-slot selection (queries.sql, due_slot_predicate)."""
        after_start, after_id = self.after or (None, None)
        return {
            "as_of": self.as_of,
            "now": self.now,
            "batch_size": self.batch_size,
            "after_start": after_start,
            "after_id": after_id,
            "exclude_ids": list(self.exclude_ids),
        }


@dataclass(frozen=True, slots=True)
class LockedBatch:
    """What one selection took: the slots, oldest first, and the rows it passed over.

    `window_end` is where the batch's window ended when it was full (its last row),
    else None: nothing more is due. `previous_attempts[i]` is how often `slots[i]`
    was rejected before (0 when it is not in quarantine; only the row-by-row path
    reads it).
    """

    slots: tuple[SlotRef, ...]
    skipped_locked_count: int
    window_end: Position | None = None
    previous_attempts: tuple[int, ...] = ()
    taken: int | None = None  # rows taken, when `slots` was not asked for

    @property
    def count(self) -> int:
        return len(self.slots) if self.taken is None else self.taken


@dataclass(frozen=True, slots=True)
class Preflight:
    """The server's clock, the role, and what it lacks to run a cycle (empty: nothing);
    when the search_path finds no availability_slots, the schemas that hold one."""

    server_clock: datetime
    role: str
    problems: tuple[str, ...]
    slot_table_schemas: tuple[str, ...] = ()
    search_path: str = ""


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
        settings = SessionSettings(
            ApplicationName.WORKER, limits=limits, autocommit=True, prepare=prepare
        )
        async with Session.open(database_url, settings) as session:
            yield cls(session)

    def transaction(self) -> AbstractAsyncContextManager[Transaction]:
        """One batch: committed whole or rolled back whole (see Session.transaction)."""
        return self._session.transaction()

    async def preflight(self) -> Preflight:
        server_clock, role, problems, schemas, search_path = await self._session.row(
            "cycle_preflight"
        )
        return Preflight(
            server_clock=server_clock,
            role=role,
            problems=tuple(problems),
            slot_table_schemas=tuple(schemas or ()),
            search_path=search_path,
        )

    async def schema_revision(self) -> str | None:
        """The migration the schema is at (the role reads the history table: a
        requirement the preflight checks)."""
        return await read_schema_revision(self._session)

    async def expire_batch(self, selection: Selection, *, with_slots: bool = True) -> LockedBatch:
        """Lock and expire a batch in one statement; a rejected row fails it whole.

        Without `with_slots` only counts come back (`taken`): what logs and metrics
        need; the slots and their tenants are for a batch's trace span.
        """
        if not with_slots:
            row = await self._session.row("expire_batch_counted", selection.parameters())
            taken, skipped, end_start, end_id = row
            return LockedBatch(
                slots=(),
                skipped_locked_count=int(skipped),
                window_end=_window_end(int(taken), selection.batch_size, end_start, end_id),
                taken=int(taken),
            )
        row = await self._session.row("expire_batch", selection.parameters())
        ids, tenant_ids, skipped, end_start, end_id = row
        return LockedBatch(
            slots=_slot_refs(ids, tenant_ids),
            skipped_locked_count=int(skipped),
            window_end=_window_end(len(ids), selection.batch_size, end_start, end_id),
        )

    async def lock_batch(self, selection: Selection) -> LockedBatch:
        """Lock a batch without changing it, for row-by-row expiry."""
        row = await self._session.row("lock_batch", selection.parameters())
        ids, tenant_ids, attempts, skipped, end_start, end_id = row
        return LockedBatch(
            slots=_slot_refs(ids, tenant_ids),
            skipped_locked_count=int(skipped),
            window_end=_window_end(len(ids), selection.batch_size, end_start, end_id),
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


def _window_end(taken: int, wanted: int, start_at: datetime, slot_id: UUID) -> Position | None:
    return (start_at, slot_id) if taken >= wanted else None


def _slot_refs(ids: Sequence[UUID], tenant_ids: Sequence[UUID]) -> tuple[SlotRef, ...]:
    return tuple(SlotRef(id=i, tenant_id=t) for i, t in zip(ids, tenant_ids, strict=True))
