"""The slot context's repository: the one module that runs slot_context.sql.

It turns rows into frozen Slot values; its Session translates the driver's
errors. Each operation of the slot context is one transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Self
from uuid import UUID

from slot_expiration.db.session import ApplicationName, Session, SessionSettings, Transaction
from slot_expiration.domain import Slot, SlotStatus

# Not the worker's name: these sessions never count as worker sessions (status).
# Statements are planned with their parameters every time (never prepared), so
# the partial indexes serve them.
SETTINGS: Final = SessionSettings(ApplicationName.SLOTS, autocommit=True)
# The first key of the publication locks (two-key advisory locks): "SLOT".
PUBLICATION_LOCK_CLASS: Final = 0x534C4F54

# Open bounds of a time range, as PostgreSQL timestamptz values.
EARLIEST: Final = datetime.min.replace(tzinfo=UTC)
LATEST: Final = datetime.max.replace(tzinfo=UTC)
_NO_ID: Final = UUID(int=0)


@dataclass(frozen=True, slots=True)
class TenantSlot:
    """A slot as a tenant names it: another tenant's id finds nothing."""

    id: UUID
    tenant_id: UUID


@dataclass(frozen=True, slots=True)
class ShowcaseQuery:
    """One page of the showcase, as the statement needs it."""

    tenant_id: UUID
    consultant_id: UUID | None
    earliest_start: datetime
    start_before: datetime
    after: tuple[datetime, UUID] | None
    limit: int


class SlotContextStore:
    """Repository over `availability_slots` for publish, book-slot, archive and lists."""

    def __init__(self, session: Session) -> None:
        self._session = session

    @classmethod
    @asynccontextmanager
    async def connect(cls, database_url: str) -> AsyncIterator[Self]:
        async with Session.open(database_url, SETTINGS) as session:
            yield cls(session)

    def transaction(self) -> AbstractAsyncContextManager[Transaction]:
        """One operation: committed whole, or rolled back whole on any error."""
        return self._session.transaction()

    async def lock_consultant_publication(self, tenant_id: UUID, consultant_id: UUID) -> None:
        """Until this transaction ends, no other publication for this consultant runs."""
        params = {
            "lock_class": PUBLICATION_LOCK_CLASS,
            "tenant_id": tenant_id,
            "consultant_id": consultant_id,
        }
        await self._session.execute("lock_consultant_publication", params)

    async def occupying_slots_in_window(
        self,
        tenant_id: UUID,
        consultant_id: UUID,
        occupying: Collection[SlotStatus],
        window: tuple[datetime, datetime],
    ) -> list[Slot]:
        """The consultant's slots in `occupying` statuses that overlap [start, end)."""
        params = {
            "tenant_id": tenant_id,
            "consultant_id": consultant_id,
            "occupying": _values(occupying),
            "window_start": window[0],
            "window_end": window[1],
        }
        return await self._fetch("occupying_slots_in_window", params)

    async def insert_published(
        self,
        tenant_id: UUID,
        consultant_id: UUID,
        ids: Sequence[UUID],
        ranges: Sequence[tuple[datetime, datetime]],
        now: datetime,
    ) -> list[Slot]:
        """Insert a publication's slots as Available, version 1; returned in batch order."""
        params = {
            "tenant_id": tenant_id,
            "consultant_id": consultant_id,
            "status": SlotStatus.AVAILABLE.value,
            "now": now,
            "ids": list(ids),
            "starts": [start for start, _ in ranges],
            "ends": [end for _, end in ranges],
        }
        inserted = {slot.id: slot for slot in await self._fetch("insert_published_slots", params)}
        return [inserted[slot_id] for slot_id in ids]

    async def book(
        self,
        slot: TenantSlot,
        sources: Collection[SlotStatus],
        target: SlotStatus,
        earliest_start: datetime,
        now: datetime,
    ) -> Slot | None:
        """The booked slot, or None when the guards let no row through."""
        params = {
            "id": slot.id,
            "tenant_id": slot.tenant_id,
            "sources": _values(sources),
            "target": target.value,
            "earliest_start": earliest_start,
            "now": now,
        }
        return _one_or_none(await self._fetch("book_slot", params))

    async def transition(
        self, slot: TenantSlot, sources: Collection[SlotStatus], target: SlotStatus, now: datetime
    ) -> Slot | None:
        """The moved slot, or None when the tenant has no such slot in a source status."""
        params = {
            "id": slot.id,
            "tenant_id": slot.tenant_id,
            "sources": _values(sources),
            "target": target.value,
            "now": now,
        }
        return _one_or_none(await self._fetch("transition_slot", params))

    async def tenant_slot(self, slot: TenantSlot) -> Slot | None:
        """The tenant's slot as committed now, or None (unknown, or another tenant's)."""
        rows = await self._fetch("tenant_slot", {"id": slot.id, "tenant_id": slot.tenant_id})
        return _one_or_none(rows)

    async def showcase_page(
        self, page: ShowcaseQuery, bookable: Collection[SlotStatus]
    ) -> list[Slot]:
        after_start, after_id = page.after or (EARLIEST, _NO_ID)
        params: dict[str, Any] = {
            "tenant_id": page.tenant_id,
            "bookable": _values(bookable),
            "earliest_start": page.earliest_start,
            "start_before": page.start_before,
            "after_start": after_start,
            "after_id": after_id,
            "limit": page.limit,
        }
        if page.consultant_id is None:
            return await self._fetch("showcase_page", params)
        params["consultant_id"] = page.consultant_id
        return await self._fetch("showcase_page_for_consultant", params)

    async def consultant_slots(
        self,
        tenant_id: UUID,
        consultant_id: UUID,
        statuses: Collection[SlotStatus],
        window: tuple[datetime, datetime],
        limit: int | None,
    ) -> list[Slot]:
        """One consultant's slots in `statuses` starting in [window), by start."""
        params = {
            "tenant_id": tenant_id,
            "consultant_id": consultant_id,
            "statuses": _values(statuses),
            "start_from": window[0],
            "start_before": window[1],
            "limit": limit,
        }
        return await self._fetch("consultant_slots", params)

    async def _fetch(self, name: str, params: dict[str, Any]) -> list[Slot]:
        """A statement's slots, each built from its columns by name."""
        return await self._session.records(name, _slot, params)


def _values(statuses: Collection[SlotStatus]) -> list[str]:
    return sorted(status.value for status in statuses)


def _slot(  # noqa: PLR0913 - a slot's columns, by name
    *,
    id: UUID,
    tenant_id: UUID,
    consultant_id: UUID,
    start_at: datetime,
    end_at: datetime,
    status: str,
    version: int,
    created_at: datetime,
    updated_at: datetime,
) -> Slot:
    return Slot(
        id=id,
        tenant_id=tenant_id,
        consultant_id=consultant_id,
        start_at=start_at.astimezone(UTC),
        end_at=end_at.astimezone(UTC),
        status=SlotStatus(status),
        version=version,
        created_at=created_at.astimezone(UTC),
        updated_at=updated_at.astimezone(UTC),
    )


def _one_or_none(slots: list[Slot]) -> Slot | None:
    return slots[0] if slots else None
