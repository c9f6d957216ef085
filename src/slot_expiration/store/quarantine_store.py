"""The quarantine of poison rows: the one home of its reads, writes and commands.

The cycle records rejected rows and releases expired ones inside its own batch
transactions; an operator lists the quarantine and makes slots due again.
Statements: quarantine.sql.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Self
from uuid import UUID

from slot_expiration.store.errors import NotQuarantinedError
from slot_expiration.store.session import (
    ApplicationName,
    Session,
    SessionSettings,
    TransactionLimits,
)


@dataclass(frozen=True, slots=True)
class QuarantineEntry:
    """A rejected row as the cycle records it."""

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
                "messages": [e.message for e in entries],
            },
        )

    async def release(self, slot_ids: Sequence[UUID]) -> None:
        """Drop these rows from the quarantine (they expired)."""
        if slot_ids:
            await self._session.execute("release_rows", {"ids": list(slot_ids)})

    async def purge(self) -> None:
        """Forget quarantined rows that left Available some other way."""
        await self._session.execute("purge_quarantine")

    async def retry(
        self, slot_ids: Sequence[UUID], now: datetime, *, every: bool = False
    ) -> list[UUID]:
        """Make these (or `every`) quarantined slots due at `now`; returns them.

        Raises NotQuarantinedError if a named slot is not in the quarantine (the
        caller's transaction then rolls back: all or nothing).
        """
        params = {"ids": list(slot_ids), "now": now, "all": every}
        found = [row[0] for row in await self._session.rows("retry_quarantined", params)]
        if missing := set(slot_ids) - set(found):
            raise NotQuarantinedError(sorted(str(slot_id) for slot_id in missing))
        return found

    async def listing(self, limit: int) -> tuple[int, tuple[FailedSlot, ...]]:
        """How many slots are in quarantine and still Available, and the latest `limit`."""
        total = await self._session.value("quarantine_total")
        rows = await self._session.rows("quarantine_list", {"limit": limit})
        return int(total), tuple(FailedSlot(*row) for row in rows)
