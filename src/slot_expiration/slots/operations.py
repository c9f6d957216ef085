"""The slot context's operations, as a typed async API over the worker's table.

    publish   a batch of 1..500 slots for one consultant (all or nothing)
    book      book-slot, guarded by status and lead time
    showcase  a tenant's bookable slots, keyset-paginated
    list      an agent's view of one consultant's slots
    archive   an agent's clean-up (Available or Expired -> Archived)

Each call is one transaction on the operations' connection; a refusal raises
a SlotRuleError with its stable code and writes nothing. The clock is
injected (`now`), so tests and the demo can act at any moment.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Self
from uuid import UUID, uuid4

from slot_expiration.db.errors import StoreError
from slot_expiration.domain import Slot, SlotStatus, require_transition, sources_of, utc_now
from slot_expiration.slots.cursor import ShowcaseCursor
from slot_expiration.slots.errors import (
    LeadTimeViolationError,
    SlotNotAvailableError,
    SlotNotFoundError,
    SlotOverlapError,
)
from slot_expiration.slots.ranges import SlotRange, overlaps_with
from slot_expiration.slots.rules import BOOKABLE, OCCUPYING, SlotPolicy, check_publication
from slot_expiration.slots.store import (
    EARLIEST,
    LATEST,
    ShowcaseQuery,
    SlotContextStore,
    TenantSlot,
)
from slot_expiration.slots.views import WORKING_VIEW, PageRequest, ShowcasePage, TimeWindow


class SlotOperations:
    """The five operations of the slot context, on one connection."""

    def __init__(
        self,
        store: SlotContextStore,
        policy: SlotPolicy | None = None,
        now: Callable[[], datetime] = utc_now,
    ) -> None:
        self._store = store
        self._policy = policy or SlotPolicy()
        self._now = now

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        database_url: str,
        policy: SlotPolicy | None = None,
        now: Callable[[], datetime] = utc_now,
    ) -> AsyncIterator[Self]:
        """Operations on a connection of their own, closed at the end of the block."""
        async with SlotContextStore.connect(database_url) as store:
            yield cls(store, policy, now)

    async def publish(
        self, tenant_id: UUID, consultant_id: UUID, batch: Sequence[SlotRange]
    ) -> list[Slot]:
        """Publish the batch as Available slots, in its order; all or nothing.

        Raises EmptyBatchError, BatchTooLargeError, InvalidRangeError,
        SlotTooLongError, StartNotInFutureError, BeyondHorizonError or SlotOverlapError (naming
        every conflicting pair, inside the batch or with the consultant's
        Available and Booked slots).
        """
        now = self._now()
        check_publication(batch, now, self._policy.horizon)
        window = (min(s.start_at for s in batch), max(s.end_at for s in batch))
        async with self._store.transaction():
            # Taken before the check: a concurrent publication for this consultant
            # waits here until this one commits, then sees its slots.
            await self._store.lock_consultant_publication(tenant_id, consultant_id)
            occupied = await self._store.occupying_slots_in_window(
                tenant_id, consultant_id, OCCUPYING, window
            )
            if conflicts := overlaps_with(batch, occupied):
                raise SlotOverlapError(conflicts)
            ids = [uuid4() for _ in batch]
            ranges = [(slot.start_at, slot.end_at) for slot in batch]
            return await self._store.insert_published(tenant_id, consultant_id, ids, ranges, now)

    async def book(
        self, tenant_id: UUID, slot_id: UUID, *, min_lead_time: timedelta | None = None
    ) -> Slot:
        """Book-slot: Available -> Booked, if the slot starts at least the lead time
        (`min_lead_time`, else the policy's) from now.

        Raises SlotNotAvailableError (not Available, unknown, or another
        tenant's: the last two alike) or LeadTimeViolationError.
        """
        now = self._now()
        earliest = self._policy.earliest_bookable_start(now, min_lead_time)
        target = SlotStatus.BOOKED
        async with self._store.transaction():
            slot = TenantSlot(slot_id, tenant_id)
            booked = await self._store.book(slot, sources_of(target), target, earliest, now)
            if booked is not None:
                return booked
            current = await self._store.tenant_slot(slot)
        if current is None:
            raise SlotNotAvailableError(slot_id)
        if current.status not in sources_of(target):
            raise SlotNotAvailableError(slot_id, current.status)
        if current.start_at < earliest:
            raise LeadTimeViolationError(slot_id, current.start_at, earliest - now)
        raise _unexplained(slot_id, current)

    async def archive(self, tenant_id: UUID, slot_id: UUID) -> Slot:
        """An agent's clean-up: Available or Expired -> Archived.

        Raises SlotNotFoundError (unknown, or another tenant's) or
        ForbiddenTransitionError (Booked, or already Archived).
        """
        now = self._now()
        target = SlotStatus.ARCHIVED
        async with self._store.transaction():
            slot = TenantSlot(slot_id, tenant_id)
            moved = await self._store.transition(slot, sources_of(target), target, now)
            if moved is not None:
                return moved
            current = await self._store.tenant_slot(slot)
        if current is None:
            raise SlotNotFoundError(slot_id)
        require_transition(current.status, target, slot_id)
        raise _unexplained(slot_id, current)

    async def showcase(
        self,
        tenant_id: UUID,
        *,
        consultant_id: UUID | None = None,
        window: TimeWindow | None = None,
        page: PageRequest | None = None,
        min_lead_time: timedelta | None = None,
    ) -> ShowcasePage:
        """The public showcase (list-available-slots): the tenant's bookable slots
        starting at least the lead time (`min_lead_time`, else the policy's) from
        now, optionally for one consultant and within `window`, by (start, id),
        one page at a time."""
        window, page = window or TimeWindow(), page or PageRequest()
        earliest = self._policy.earliest_bookable_start(self._now(), min_lead_time)
        wanted = ShowcaseQuery(
            tenant_id=tenant_id,
            consultant_id=consultant_id,
            earliest_start=max(earliest, window.start_from or earliest),
            start_before=window.start_before or LATEST,
            after=(page.after.start_at, page.after.id) if page.after else None,
            limit=page.limit + 1,  # one more tells whether another page follows
        )
        async with self._store.transaction():
            slots = await self._store.showcase_page(wanted, BOOKABLE)
        shown = tuple(slots[: page.limit])
        more = len(slots) > page.limit
        return ShowcasePage(shown, ShowcaseCursor.after(shown[-1]) if more else None)

    async def list_slots(
        self,
        tenant_id: UUID,
        consultant_id: UUID,
        *,
        statuses: Collection[SlotStatus] = WORKING_VIEW,
        window: TimeWindow | None = None,
        limit: int | None = None,
    ) -> list[Slot]:
        """The agent's list (list-slots): one consultant's slots starting within
        `window`, by start; Available and Booked unless other statuses are asked for."""
        window = window or TimeWindow()
        bounds = (window.start_from or EARLIEST, window.start_before or LATEST)
        async with self._store.transaction():
            return await self._store.consultant_slots(
                tenant_id, consultant_id, statuses or WORKING_VIEW, bounds, limit
            )


def _unexplained(slot_id: UUID, current: Slot) -> StoreError:
    # A refused transition whose slot then reads as allowed: statuses only ever
    # move forward, so this means the data changed under rules other than ours.
    return StoreError(
        f"slot {slot_id} was not changed, yet it reads {current.status.value} starting "
        f"{current.start_at.isoformat()}"
    )
