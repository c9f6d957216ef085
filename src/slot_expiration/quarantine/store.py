"""The quarantine's table, slot_expiration_failures: every read and write of it.

The cycle records rejected rows and ends the entries of expired ones inside its
own batch transactions; an operator lists the quarantine, parks slots and makes
them due again. An entry that ends is kept (ended, with the status its slot left
for) until the worker purges it past the retention. Statements: quarantine.sql.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from functools import partial
from typing import Any, Final, Self
from uuid import UUID

from slot_expiration.db.errors import NotQuarantinedError
from slot_expiration.db.session import (
    ApplicationName,
    Session,
    SessionSettings,
    TransactionLimits,
)
from slot_expiration.domain.text import MAX_MESSAGE_CHARS, excerpt
from slot_expiration.schema.location import verify_slot_table

# A purge deletes at most this many ended entries per transaction: one purge runs at each
# cycle's tail, far more often than entries end, so it keeps up.
PURGE_BATCH: Final = 500


@dataclass(frozen=True, slots=True)
class QuarantineEntry:
    """A rejected row as the cycle records it (its message bounded when stored)."""

    slot_id: UUID
    attempts: int
    next_attempt_at: datetime
    sqlstate: str
    message: str


@dataclass(frozen=True, slots=True)
class FailedSlot:
    """A slot the database keeps rejecting, as the quarantine lists it."""

    slot_id: UUID
    tenant_id: UUID
    attempts: int
    first_failed_at: datetime
    last_failed_at: datetime
    next_attempt_at: datetime
    sqlstate: str
    message: str
    parked_at: datetime | None = None  # retries stopped until `quarantine retry`

    @classmethod
    def from_columns(cls, *, message: str, message_length: int, **columns: Any) -> Self:
        """A row of quarantine_list: its message's start and whole length, shown bounded."""
        return cls(message=excerpt(message, message_length), **columns)

    def as_json(self) -> dict[str, Any]:
        return _json(self)


@dataclass(frozen=True, slots=True)
class EndedEntry:
    """A quarantine entry that ended: its slot expired (`Expired`) or left Available
    another way (`Booked`, `Archived`), possibly while parked."""

    slot_id: UUID
    tenant_id: UUID
    attempts: int
    first_failed_at: datetime
    last_failed_at: datetime
    sqlstate: str
    message: str
    parked_at: datetime | None
    ended_at: datetime
    ended_status: str

    @classmethod
    def from_columns(cls, *, message: str, message_length: int, **columns: Any) -> Self:
        """A row of quarantine_ended: its message shown bounded."""
        return cls(message=excerpt(message, message_length), **columns)

    @property
    def expired(self) -> bool:
        return self.ended_status == "Expired"

    def as_json(self) -> dict[str, Any]:
        return _json(self) | {"ended_how": "expired" if self.expired else "left_available"}


def _json(entry: FailedSlot | EndedEntry) -> dict[str, Any]:
    """An entry's fields for JSON: ids as text, instants in ISO 8601."""
    return {
        name: value.isoformat()
        if isinstance(value, datetime)
        else str(value)
        if isinstance(value, UUID)
        else value
        for name, value in asdict(entry).items()
    }


@dataclass(frozen=True, slots=True)
class ListingFilter:
    """`quarantine list`'s filters; None: any."""

    sqlstate: str | None = None
    tenant_id: UUID | None = None

    def parameters(self) -> dict[str, object]:
        return {"sqlstate": self.sqlstate, "tenant_id": self.tenant_id}


@dataclass(frozen=True, slots=True)
class QuarantineListing:
    total: int  # entries still Available, parked ones included
    parked: int
    latest: tuple[FailedSlot, ...]
    waiting_since: datetime | None  # the first failure of the oldest entry not parked

    @property
    def waiting(self) -> int:
        """Entries retried on their backoff: those not parked."""
        return self.total - self.parked


@dataclass(frozen=True, slots=True)
class QuarantineGauges:
    """What the worker reports of the quarantine after each cycle: slots in it (still
    Available, not parked), and how long the oldest of them has been failing (None: none)."""

    quarantined: int
    oldest_age_seconds: float | None


class QuarantineStore:
    """slot_expiration_failures, on the session (and in the transaction) it is given."""

    def __init__(self, session: Session) -> None:
        self._session = session

    @classmethod
    @asynccontextmanager
    async def connect(cls, database_url: str, limits: TransactionLimits) -> AsyncIterator[Self]:
        """An operator's session of its own (never counted as a worker's), in one
        transaction: all of a command, or nothing of it."""
        settings = SessionSettings(ApplicationName.ADMIN, limits=limits)
        async with Session.open(database_url, settings) as session, session.transaction():
            await verify_slot_table(session)
            yield cls(session)

    async def record(self, entries: Sequence[QuarantineEntry], now: datetime) -> None:
        """Record rejected rows; the selection passes over each until its next attempt."""
        if not entries:
            return
        await self._session.execute(
            "quarantine_rows",
            {
                "now": now,
                "ids": [e.slot_id for e in entries],
                "attempts": [e.attempts for e in entries],
                "next_attempts": [e.next_attempt_at for e in entries],
                "sqlstates": [e.sqlstate for e in entries],
                "messages": [excerpt(e.message) for e in entries],
            },
        )

    async def release(self, slot_ids: Sequence[UUID], now: datetime) -> None:
        """End these rows' entries: they expired."""
        if slot_ids:
            await self._session.execute("release_rows", {"ids": list(slot_ids), "now": now})

    async def end_departed(self, now: datetime) -> None:
        """End the entries of slots that left Available some other way; forget those of
        slots the calendar deleted."""
        await self._session.execute("end_departed_entries", {"now": now})
        await self._session.execute("forget_deleted_slots")

    async def purge_ended(self, cutoff: datetime, limit: int = PURGE_BATCH) -> int:
        """Delete up to `limit` entries that ended before `cutoff`; returns how many."""
        params = {"cutoff": cutoff, "limit": limit}
        return await self._session.execute("purge_ended_quarantine", params)

    async def measure(self, now: datetime) -> QuarantineGauges:
        """Slots in quarantine, still Available, not parked; the oldest one's age at `now`."""
        return await self._session.record("measure_quarantine", QuarantineGauges, {"now": now})

    async def retry(
        self, slot_ids: Sequence[UUID], now: datetime, *, every: bool = False
    ) -> list[UUID]:
        """Make these (or `every` unparked) quarantined slots due at `now`; returns them.

        Raises NotQuarantinedError if a named slot is not in the quarantine (the
        caller's transaction then rolls back: all or nothing).
        """
        params = {"ids": list(slot_ids), "now": now, "all": every}
        return await self._named("retry_quarantined", slot_ids, params)

    async def park(self, slot_ids: Sequence[UUID], now: datetime) -> list[UUID]:
        """Stop retrying these quarantined slots until they are retried by name."""
        return await self._named("park_quarantined", slot_ids, {"ids": list(slot_ids), "now": now})

    async def _named(
        self, name: str, slot_ids: Sequence[UUID], params: dict[str, object]
    ) -> list[UUID]:
        found = await self._session.column(name, params)
        if missing := set(slot_ids) - set(found):
            raise NotQuarantinedError(sorted(str(slot_id) for slot_id in missing))
        return found

    async def listing(self, limit: int, where: ListingFilter | None = None) -> QuarantineListing:
        """The slots in quarantine and still Available (parked ones too): how many, how
        many of them parked, and the latest `limit`."""
        params = (where or ListingFilter()).parameters()
        shown = {"limit": limit, "message_chars": MAX_MESSAGE_CHARS}
        latest = await self._session.records(
            "quarantine_list", FailedSlot.from_columns, params | shown
        )
        row = partial(QuarantineListing, latest=tuple(latest))
        return await self._session.record("quarantine_total", row, params)

    async def ended(self, limit: int, where: ListingFilter | None = None) -> tuple[EndedEntry, ...]:
        """Entries that ended, kept for the retention period; the latest end first."""
        params = (where or ListingFilter()).parameters()
        shown = {"limit": limit, "message_chars": MAX_MESSAGE_CHARS}
        return tuple(
            await self._session.records("quarantine_ended", EndedEntry.from_columns, params | shown)
        )
