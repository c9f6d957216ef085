"""The worker's repository: one cycle's selection, expiry, preflight and counts.

It runs the named statements of expiry.sql on a Session (db/session.py), which
translates the driver's errors, and turns rows into frozen values; a healthy batch
is a transaction of its own in one round trip (Session.committed_record). The
quarantine's statements run on the same session (QuarantineStore(store.session)).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self
from uuid import UUID

from slot_expiration.db.errors import (
    INSUFFICIENT_PRIVILEGE,
    UNDEFINED_FUNCTION,
    MisconfiguredStoreError,
)
from slot_expiration.db.session import (
    ApplicationName,
    Session,
    SessionSettings,
    Transaction,
    TransactionLimits,
)
from slot_expiration.domain import SlotRef, SlotStatus
from slot_expiration.expiry.throttle import Standby
from slot_expiration.pause import PauseStore
from slot_expiration.quarantine.store import QuarantineStore
from slot_expiration.schema.contract import WorkerProblems, worker_problems
from slot_expiration.schema.location import verify_slot_table
from slot_expiration.schema.version import read_schema_revision

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
        """The parameters of the due-slot selection (cycle.sql, due_slot_predicate)."""
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
    taken: int | None = None  # rows expired, by the batch statement (it returns no slots)

    @property
    def count(self) -> int:
        return len(self.slots) if self.taken is None else self.taken


@dataclass(frozen=True, slots=True)
class Preflight:
    """The server's clock, and what the role lacks to run a cycle (schema.contract)."""

    server_clock: datetime
    lacks: WorkerProblems


@dataclass(frozen=True, slots=True)
class _Clock:
    server_clock: datetime


@dataclass(frozen=True, slots=True)
class _BatchRow:
    """What the batch statements return, by column name: the window's end, the rows
    passed over, and (as each statement returns them) the slots, their earlier
    attempts, or only how many."""

    skipped_locked_count: int
    window_end_start_at: datetime
    window_end_id: UUID
    ids: Sequence[UUID] = ()
    tenant_ids: Sequence[UUID] = ()
    previous_attempts: Sequence[int] = ()
    expired_count: int | None = None

    def locked(self, batch_size: int) -> LockedBatch:
        taken = len(self.ids) if self.expired_count is None else self.expired_count
        full = taken >= batch_size
        return LockedBatch(
            slots=tuple(
                SlotRef(id=i, tenant_id=t) for i, t in zip(self.ids, self.tenant_ids, strict=True)
            ),
            skipped_locked_count=self.skipped_locked_count,
            window_end=(self.window_end_start_at, self.window_end_id) if full else None,
            previous_attempts=tuple(self.previous_attempts),
            taken=self.expired_count,
        )


@dataclass(frozen=True, slots=True)
class StatusCount:
    status: str
    slots: int


async def counts_by_status(session: Session) -> dict[SlotStatus, int]:
    """How many slots hold each status (every status, 0 for none)."""
    counts = dict.fromkeys(SlotStatus, 0)
    rows = await session.records("count_by_status", StatusCount)
    counts.update({SlotStatus(row.status): row.slots for row in rows})
    return counts


async def explain_pick(session: Session, as_of: datetime, batch_size: int) -> Any:
    """The plan of the cycle's pick (EXPLAIN, FORMAT JSON: not run), at `as_of`, for a batch
    of `batch_size`: `status` reads whether it uses the worker's index."""
    return await session.value("explain_pick", Selection(as_of, as_of, batch_size).parameters())


class CycleStore:
    """The worker's statements over `availability_slots`, on one session."""

    def __init__(self, session: Session) -> None:
        self.session = session
        # The cycle's one collaborator for slot_expiration_failures, on this session.
        self.quarantine = QuarantineStore(session)
        # The pause in force, read by each cycle in its first transaction.
        self.pause = PauseStore(session)

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
        return self.session.transaction()

    async def preflight(self) -> Preflight:
        """The server's clock, then what the role lacks (the contract's worker_problems):
        two statements, once per cycle, in one transaction."""
        clock = await self.session.record("cycle_clock", _Clock)
        return Preflight(clock.server_clock, await worker_problems(self.session))

    async def verify_slot_table(self) -> None:
        """Refuse another availability_slots than the one meant (schema.location)."""
        await verify_slot_table(self.session)

    async def schema_revision(self) -> str | None:
        """The migration the schema is at (the role reads the history table: a
        requirement the preflight checks)."""
        return await read_schema_revision(self.session)

    async def expire_batch(self, selection: Selection) -> LockedBatch:
        """Lock and expire a batch in one statement, a transaction of its own in one round
        trip (Session.committed_record); a rejected row fails it whole, nothing committed.
        Only counts come back (`taken`). A cancellation once it committed is raised as
        CommittedThenCancelled carrying the LockedBatch."""

        def batch(**columns: Any) -> LockedBatch:
            return _BatchRow(**columns).locked(selection.batch_size)

        return await self.session.committed_record("expire_batch", batch, selection.parameters())

    async def lock_batch(self, selection: Selection) -> LockedBatch:
        """Lock a batch without changing it, for row-by-row expiry."""
        row = await self.session.record("lock_batch", _BatchRow, selection.parameters())
        return row.locked(selection.batch_size)

    async def check_constraints_immediately(self) -> None:
        """From here to the end of the transaction, no constraint waits for COMMIT."""
        await self.session.execute("check_constraints_immediately")

    async def expire_slot(self, slot_id: UUID, as_of: datetime) -> bool:
        """Expire one locked slot inside a savepoint, so a rejection spares the batch.

        Raises RowRejectedError carrying the slot id when the database refuses it.
        """
        async with self.session.savepoint(slot_id):
            expired = await self.session.column("expire_slot", {"id": slot_id, "as_of": as_of})
        return bool(expired)

    async def count_by_status(self) -> dict[SlotStatus, int]:
        return await counts_by_status(self.session)

    async def count_backlog(self, as_of: datetime) -> int:
        return int(await self.session.value("count_backlog", {"as_of": as_of}))

    async def standbys(self) -> list[Standby] | None:
        """The streaming standbys and where their replay is (the drain's throttle), in a
        transaction of its own (one round trip); None where the role may not run the
        function that reads them (`grant` gives it) or the schema has none yet (`migrate`
        makes it)."""
        try:
            return await self.session.committed_records("standbys", Standby)
        except MisconfiguredStoreError as error:
            if error.sqlstate in {INSUFFICIENT_PRIVILEGE, UNDEFINED_FUNCTION}:
                return None
            raise

    async def count_backlog_capped(self, as_of: datetime | None, cap: int) -> int:
        """Available rows due at `as_of` (None: the database's now), up to `cap` at most."""
        params = {"as_of": as_of, "cap": cap}
        return int(await self.session.value("count_backlog_capped", params))
