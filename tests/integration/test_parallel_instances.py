"""Several workers side by side: SKIP LOCKED gives every row to exactly one of them."""

from __future__ import annotations

import asyncio

import pytest

from slot_expiration.domain import SlotStatus
from tests.support.cycles import run_cycle
from tests.support.database import SlotDatabase
from tests.support.slots import past_slots
from tests.support.waiting import eventually
from tests.support.witness import witnessed

pytestmark = pytest.mark.integration


async def test_three_concurrent_cycles_expire_every_row_exactly_once(db: SlotDatabase) -> None:
    slots = await db.insert(past_slots(900))
    await db.install_gate_trigger()
    await db.close_gate()
    async with witnessed(db.url) as witness:
        runs = [asyncio.create_task(run_cycle(db.url, batch_size=300)) for _ in range(3)]

        async def all_blocked() -> bool:
            return await db.worker_sessions(waiting_on_gate=True) == 3

        await eventually(all_blocked)  # each holds its own 300 locked rows
        await db.open_gate()
        results = await asyncio.gather(*runs)

    expired_ids = [slot.id for slot in witness.expired]
    assert sorted(result.expired_count for result in results) == [300, 300, 300]
    assert sorted(len(slots) for slots in witness.by_session.values()) == [300, 300, 300]
    assert len(set(expired_ids)) == len(expired_ids) == 900
    rows = await db.rows()
    assert all(rows[s.id].status is SlotStatus.EXPIRED for s in slots)
    assert all(rows[s.id].version == s.version + 1 for s in slots)


async def test_concurrent_cycles_over_a_small_backlog_never_double_expire(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(200))
    results = await asyncio.gather(*(run_cycle(db.url, batch_size=150) for _ in range(4)))

    assert sum(r.expired_count for r in results) == 200
    rows = await db.rows()
    assert {rows[s.id].version for s in slots} == {slots[0].version + 1}
