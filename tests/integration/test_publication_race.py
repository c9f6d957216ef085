"""Two publications for one consultant can never both slip an overlapping pair through
(INV-SLT-2): they are serialized per consultant, and the second one sees the first's
slots (real PostgreSQL, each publication on its own connection)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from uuid import UUID, uuid4

import pytest

from slot_expiration.domain import Slot, SlotRuleError, SlotStatus
from slot_expiration.slots import SlotOverlapError, SlotRange
from tests.support.database import GATE_KEY, SlotDatabase
from tests.support.gates import SLOTS_APPLICATION, gate_inserts_of, sessions
from tests.support.slot_context import in_minutes, operations
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

TENANT = uuid4()


async def publish_on_own_connection(
    url: str, consultant_id: UUID, batch: list[SlotRange]
) -> list[Slot] | SlotRuleError:
    async with operations(url) as ops:
        try:
            return await ops.publish(TENANT, consultant_id, batch)
        except SlotRuleError as refused:
            return refused


async def occupied_overlaps(db: SlotDatabase) -> int:
    """Pairs of one consultant's Available/Booked slots that overlap (INV-SLT-2 broken)."""
    cursor = await db.conn.execute(
        "SELECT count(*) FROM availability_slots a JOIN availability_slots b "
        "ON a.tenant_id = b.tenant_id AND a.consultant_id = b.consultant_id AND a.id < b.id "
        "AND a.start_at < b.end_at AND b.start_at < a.end_at "
        "WHERE a.status IN ('Available', 'Booked') AND b.status IN ('Available', 'Booked')"
    )
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def test_a_publication_arriving_while_another_inserts_waits_then_sees_its_slots(
    db: SlotDatabase,
) -> None:
    """The interleaving that would break INV-SLT-2 without the lock: the first has checked
    and is inserting (held at a gate) when the second arrives and checks."""
    anna, boris = uuid4(), uuid4()
    await gate_inserts_of(db, anna, GATE_KEY)
    await db.close_gate()
    first = asyncio.create_task(publish_on_own_connection(db.url, anna, [in_minutes(120, 60)]))
    await eventually(lambda: _waiting_at_advisory_locks(db, 1))

    second = asyncio.create_task(publish_on_own_connection(db.url, anna, [in_minutes(150, 60)]))
    await eventually(lambda: _waiting_at_advisory_locks(db, 2))
    waits = {s.pid: s.blocked_by for s in await sessions(db, SLOTS_APPLICATION) if s.at_a_gate}
    # Another consultant's publication is not held up by either.
    other = await asyncio.wait_for(
        publish_on_own_connection(db.url, boris, [in_minutes(150, 60)]), 30
    )
    second_was_waiting = not second.done()
    await db.open_gate()
    published, refused = await asyncio.wait_for(asyncio.gather(first, second), 30)

    # The first waits on the test's gate, the second on the first (its consultant lock).
    (inserting,) = [pid for pid, by in waits.items() if by == (db.conn.info.backend_pid,)]
    assert [by for pid, by in waits.items() if pid != inserting] == [(inserting,)]
    assert second_was_waiting
    assert isinstance(other, list)
    assert isinstance(published, list)
    assert isinstance(refused, SlotOverlapError)
    assert [c.existing_id for c in refused.conflicts] == [published[0].id]
    assert await occupied_overlaps(db) == 0
    assert len(await db.rows()) == 2


async def test_many_overlapping_publications_at_once_let_exactly_one_through(
    db: SlotDatabase,
) -> None:
    """A real race, started together on their own connections, five rounds: each round's
    batches all overlap one another, so exactly one of them may be published."""
    consultant = uuid4()
    for round_number in range(5):
        base = 120 + 600 * round_number
        batches = [
            [in_minutes(base + 7 * i, 60), in_minutes(base + 300 + 7 * i, 60)] for i in range(6)
        ]
        outcomes = await asyncio.gather(
            *(publish_on_own_connection(db.url, consultant, batch) for batch in batches)
        )

        published = [o for o in outcomes if isinstance(o, list)]
        refused = [o for o in outcomes if not isinstance(o, list)]
        assert len(published) == 1, outcomes
        assert all(isinstance(o, SlotOverlapError) for o in refused), outcomes
        winners = {slot.id for slot in published[0]}
        for overlap in refused:
            assert isinstance(overlap, SlotOverlapError)
            assert {c.existing_id for c in overlap.conflicts} <= winners
    statuses = await db.statuses()
    assert len(statuses) == 10
    assert set(statuses.values()) == {SlotStatus.AVAILABLE}
    assert await occupied_overlaps(db) == 0


async def test_a_publication_overlapping_a_slot_being_booked_is_refused_either_way(
    db: SlotDatabase,
) -> None:
    """Booking never frees or takes time: the slot blocks before and after it is Booked."""
    consultant = uuid4()
    async with operations(db.url) as ops:
        (slot,) = await ops.publish(TENANT, consultant, [in_minutes(120)])
        booking = asyncio.create_task(ops.book(TENANT, slot.id, min_lead_time=timedelta(0)))
        refused = await publish_on_own_connection(db.url, consultant, [in_minutes(130)])
        await booking

    assert isinstance(refused, SlotOverlapError)
    assert await occupied_overlaps(db) == 0


async def _waiting_at_advisory_locks(db: SlotDatabase, count: int) -> bool:
    return sum(s.at_a_gate for s in await sessions(db, SLOTS_APPLICATION)) == count
