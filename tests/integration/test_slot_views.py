"""The public showcase (keyset pages) and the agent's list; and what an expiry changes in
them (real PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID, uuid4

import pytest

from slot_expiration.domain import Slot, SlotStatus
from slot_expiration.slots import PageRequest, ShowcaseCursor, SlotOperations, TimeWindow
from tests.support.cycles import run_cycle
from tests.support.database import SlotDatabase
from tests.support.slot_context import Clock, every_hour, in_minutes, operations
from tests.support.slots import AS_OF, make_slot

pytestmark = pytest.mark.integration

TENANT, OTHER_TENANT = uuid4(), uuid4()
ANNA, BORIS = uuid4(), uuid4()


async def everything_shown(ops: SlotOperations, limit: int) -> list[Slot]:
    """Page through the whole showcase; every page but the last is full."""
    pages: list[tuple[Slot, ...]] = []
    cursor: ShowcaseCursor | None = None
    while True:
        page = await ops.showcase(TENANT, page=PageRequest(limit, cursor))
        pages.append(page.slots)
        if page.next_cursor is None:
            break
        assert len(page.slots) == limit
        cursor = page.next_cursor
    return [slot for page_slots in pages for slot in page_slots]


async def test_the_showcase_lists_only_the_tenants_bookable_slots_by_start(
    db: SlotDatabase,
) -> None:
    async with operations(db.url) as ops:
        soon, later, booked, archived, latest = await ops.publish(
            TENANT, ANNA, [in_minutes(m) for m in (30, 240, 120, 180, 300)]
        )
        (other_consultant,) = await ops.publish(TENANT, BORIS, [in_minutes(60)])
        await ops.publish(OTHER_TENANT, ANNA, [in_minutes(90)])
        await ops.book(TENANT, booked.id)
        await ops.archive(TENANT, archived.id)
        page = await ops.showcase(TENANT)

    # `soon` starts within the 60-minute lead time.
    assert [s.id for s in page.slots] == [other_consultant.id, later.id, latest.id]
    assert page.next_cursor is None
    assert soon.id not in {s.id for s in page.slots}


async def test_the_showcase_filters_by_consultant_and_by_start_window(db: SlotDatabase) -> None:
    async with operations(db.url) as ops:
        anna = await ops.publish(TENANT, ANNA, every_hour(6))
        boris = await ops.publish(TENANT, BORIS, every_hour(6, first=150))
        start, end = AS_OF + timedelta(minutes=180), AS_OF + timedelta(minutes=360)
        window = TimeWindow(start, end)
        of_anna = await ops.showcase(TENANT, consultant_id=ANNA)
        in_window = await ops.showcase(TENANT, window=window)
        both = await ops.showcase(TENANT, consultant_id=BORIS, window=window)

    assert [s.id for s in of_anna.slots] == [s.id for s in anna]
    assert [s.start_at for s in in_window.slots] == sorted(
        s.start_at for s in anna + boris if start <= s.start_at < end
    )
    assert [s.id for s in both.slots] == [s.id for s in boris[1:4]]


async def test_a_window_starting_inside_the_lead_time_still_hides_what_starts_too_soon(
    db: SlotDatabase,
) -> None:
    async with operations(db.url) as ops:
        too_soon, bookable = await ops.publish(TENANT, ANNA, [in_minutes(10), in_minutes(90)])
        page = await ops.showcase(TENANT, window=TimeWindow(start_from=AS_OF))

    assert [s.id for s in page.slots] == [bookable.id]
    assert too_soon.id not in {s.id for s in page.slots}


async def test_the_lead_time_given_to_the_call_widens_or_narrows_the_showcase(
    db: SlotDatabase,
) -> None:
    async with operations(db.url) as ops:
        soon, later = await ops.publish(TENANT, ANNA, [in_minutes(10), in_minutes(90)])
        none = await ops.showcase(TENANT, min_lead_time=timedelta(0))
        long = await ops.showcase(TENANT, min_lead_time=timedelta(hours=2))

    assert [s.id for s in none.slots] == [soon.id, later.id]
    assert long.slots == ()


async def test_pages_cover_every_slot_once_in_order_even_with_equal_starts(
    db: SlotDatabase,
) -> None:
    # 7 consultants x 5 starts: every start is shared by 7 slots, so the cursor
    # must break ties by id.
    consultants = [uuid4() for _ in range(7)]
    async with operations(db.url) as ops:
        for consultant in consultants:
            await ops.publish(TENANT, consultant, every_hour(5))
        shown = await everything_shown(ops, limit=4)

    assert len(shown) == 35
    assert len({s.id for s in shown}) == 35
    assert [(s.start_at, s.id) for s in shown] == sorted((s.start_at, s.id) for s in shown)


async def test_the_last_page_has_no_cursor_and_a_full_last_page_is_not_followed_by_one(
    db: SlotDatabase,
) -> None:
    async with operations(db.url) as ops:
        await ops.publish(TENANT, ANNA, every_hour(4))
        first = await ops.showcase(TENANT, page=PageRequest(2))
        assert first.next_cursor is not None
        last = await ops.showcase(TENANT, page=PageRequest(2, first.next_cursor))

    assert len(last.slots) == 2
    assert last.next_cursor is None


async def test_a_page_continues_after_its_cursor_when_earlier_slots_are_booked_meanwhile(
    db: SlotDatabase,
) -> None:
    async with operations(db.url) as ops:
        slots = await ops.publish(TENANT, ANNA, every_hour(6))
        first = await ops.showcase(TENANT, page=PageRequest(3))
        await ops.book(TENANT, slots[0].id)
        await ops.book(TENANT, slots[1].id)
        second = await ops.showcase(TENANT, page=PageRequest(3, first.next_cursor))

    assert [s.id for s in first.slots + second.slots] == [s.id for s in slots]


async def test_the_agent_list_shows_available_and_booked_by_default(db: SlotDatabase) -> None:
    async with operations(db.url) as ops:
        available, booked, archived = await ops.publish(TENANT, ANNA, every_hour(3))
        await ops.book(TENANT, booked.id)
        await ops.archive(TENANT, archived.id)
        await ops.publish(TENANT, BORIS, every_hour(1))
        listed = await ops.list_slots(TENANT, ANNA)
        foreign = await ops.list_slots(OTHER_TENANT, ANNA)

    assert [(s.id, s.status) for s in listed] == [
        (available.id, SlotStatus.AVAILABLE),
        (booked.id, SlotStatus.BOOKED),
    ]
    assert foreign == []


async def test_the_agent_list_shows_expired_and_archived_only_when_asked(
    db: SlotDatabase,
) -> None:
    async with operations(db.url) as ops:
        expired, archived, available = await ops.publish(TENANT, ANNA, every_hour(3, first=30))
        await ops.archive(TENANT, archived.id)
        await run_cycle(db.url, as_of=AS_OF + timedelta(minutes=30))
        history = await ops.list_slots(
            TENANT, ANNA, statuses={SlotStatus.EXPIRED, SlotStatus.ARCHIVED}
        )
        everything = await ops.list_slots(TENANT, ANNA, statuses=set(SlotStatus))

    assert [(s.id, s.status) for s in history] == [
        (expired.id, SlotStatus.EXPIRED),
        (archived.id, SlotStatus.ARCHIVED),
    ]
    assert [s.id for s in everything] == [expired.id, archived.id, available.id]


async def test_the_agent_list_takes_a_start_window(db: SlotDatabase) -> None:
    async with operations(db.url) as ops:
        slots = await ops.publish(TENANT, ANNA, every_hour(5))
        window = TimeWindow(slots[1].start_at, slots[3].start_at)
        listed = await ops.list_slots(TENANT, ANNA, window=window)

    assert [s.id for s in listed] == [slots[1].id, slots[2].id]


async def test_an_expired_slot_leaves_showcase_and_working_view_and_frees_its_time(
    db: SlotDatabase,
) -> None:
    """The spec's postconditions of an expiry: no longer shown, no longer in the agent's
    working view, no longer counted by the overlap check of the next publication."""
    clock = Clock()
    async with operations(db.url, clock) as ops:
        (slot,) = await ops.publish(TENANT, ANNA, [in_minutes(120)])
        shown_before = await ops.showcase(TENANT, min_lead_time=timedelta(0))
        # An operator's cycle for a later AsOf: the showcase's own clock has not moved,
        # so only the status can hide the slot.
        await run_cycle(db.url, as_of=slot.start_at)
        shown_after = await ops.showcase(TENANT, min_lead_time=timedelta(0))
        working_view = await ops.list_slots(TENANT, ANNA)
        (again,) = await ops.publish(TENANT, ANNA, [in_minutes(110, 30)])

    assert [s.id for s in shown_before.slots] == [slot.id]
    assert (await db.statuses())[slot.id] is SlotStatus.EXPIRED
    assert shown_after.slots == ()
    assert working_view == []
    assert again.status is SlotStatus.AVAILABLE


async def test_slots_written_by_other_parts_of_the_calendar_are_listed_too(
    db: SlotDatabase,
) -> None:
    """The operations read the shared table, whoever wrote the rows."""
    row = make_slot(timedelta(hours=3), tenant_id=TENANT)
    await db.insert([row])
    async with operations(db.url) as ops:
        shown = await ops.showcase(TENANT)
        listed = await ops.list_slots(TENANT, row.consultant_id)

    assert [s.id for s in shown.slots] == [row.id] == [s.id for s in listed]
    assert isinstance(listed[0].id, UUID)
