"""Poison rows at the start, middle and end of a batch, a batch of only poison rows, and more
poison rows at the head than three batches.

A trigger rejects the poison rows (P0001). Healthy rows expire at the normal
rate whatever the poison; each poison row stays Available, is retried on its
backoff, and once the data is fixed (the trigger dropped) it expires exactly
once at its next attempt. So in the end every row is owed, and every row is
expired once: nothing lost, nothing done twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

import pytest

from slot_expiration.domain import Slot, SlotRef
from tests.faults.clocked import ClockedCycles
from tests.faults.workers import FaultBooks, Record
from tests.support.database import SlotDatabase
from tests.support.ledger import Ledger
from tests.support.slots import past_slots

pytestmark = pytest.mark.faults

BATCH = 10
MAX_TICKS = 30


def ids(rows: Iterable[Slot | SlotRef]) -> list[UUID]:
    return [row.id for row in rows]


async def fix_the_data(db: SlotDatabase) -> None:
    """What the operator does once the cause is known: the rows stop being rejected."""
    await db.execute("DROP TRIGGER poison ON availability_slots")


async def tick_until_drained(db: SlotDatabase, ledger: Ledger, worker: ClockedCycles) -> int:
    """Cycles until every owed row is Expired; the worker-clock seconds it took."""
    began = worker.now
    for _ in range(MAX_TICKS):
        if not ledger.pending(await db.statuses()):
            return int((worker.now - began).total_seconds())
        await worker.tick()
    raise AssertionError(f"not drained after {MAX_TICKS} cycles")


def failed_per_cycle(worker: ClockedCycles) -> list[list[UUID]]:
    return [[f.slot.id for f in outcome.failures] for outcome in worker.outcomes]


@pytest.mark.parametrize(("where", "index"), [("start", 0), ("middle", 5), ("end", BATCH - 1)])
async def test_a_poison_row_anywhere_in_a_batch_holds_back_nothing_and_expires_once_fixed(
    db: SlotDatabase, record_fault: Record, where: str, index: int
) -> None:
    slots = await db.insert(past_slots(25))
    poison = slots[index]
    await db.install_poison_trigger([poison.id], "P0001")
    books = await FaultBooks.open(db, slots, record_fault)
    worker = ClockedCycles(db.url, BATCH, witness=True)

    for _ in range(3):  # t = 0, 300 (its first retry), 600 (quarantined until 900)
        await worker.tick()
    healthy_per_cycle = [o.expired_count for o in worker.outcomes]
    await fix_the_data(db)
    fixed_for = await tick_until_drained(db, books.ledger, worker)

    audit = books.close(
        await db.rows(),
        [],
        reported=worker.reported_expired,
        fault=f"a poison row at the {where} of a batch",
        injection=f"a trigger rejects row {index + 1} of the first batch of {BATCH} (P0001); "
        "fixed (trigger dropped) after 3 cycles",
        recovery=None,
        note=f"healthy rows: {healthy_per_cycle} per cycle, none held back; the poison row "
        f"expired {fixed_for} s (worker clock) after the fix, at its next attempt",
    )
    assert healthy_per_cycle == [BATCH, BATCH, 4]  # 24 healthy rows, topped up past it
    assert failed_per_cycle(worker)[:3] == [[poison.id], [poison.id], []]
    assert worker.outcomes[3].expired[0].id == poison.id  # t = 900: 300 + 600 (doubled)
    assert await db.quarantine() == {}
    assert audit.clean, audit.describe()


async def test_a_batch_of_only_poison_rows_is_quarantined_whole_and_expires_once_fixed(
    db: SlotDatabase, record_fault: Record
) -> None:
    slots = await db.insert(past_slots(BATCH))
    await db.install_poison_trigger(ids(slots), "P0001")
    books = await FaultBooks.open(db, slots, record_fault)
    worker = ClockedCycles(db.url, BATCH, witness=True)

    for _ in range(3):
        await worker.tick()
    await fix_the_data(db)
    fixed_for = await tick_until_drained(db, books.ledger, worker)

    audit = books.close(
        await db.rows(),
        [],
        reported=worker.reported_expired,
        fault="a batch of only poison rows",
        injection=f"a trigger rejects every row of the only batch ({BATCH} rows); fixed after 3 "
        "cycles",
        recovery=None,
        note=f"all {BATCH} retried at 300 s, passed over at 600 s; expired {fixed_for} s "
        "(worker clock) after the fix",
    )
    tried = [outcome.selected_count for outcome in worker.outcomes]
    assert tried[:3] == [BATCH, BATCH, 0]  # t = 600: all in quarantine, nothing locked
    assert [o.expired_count for o in worker.outcomes[:3]] == [0, 0, 0]
    assert worker.outcomes[3].expired_count == BATCH
    assert audit.clean, audit.describe()


async def test_more_poison_rows_at_the_head_than_three_batches_leave_the_rate_unchanged(
    db: SlotDatabase, record_fault: Record
) -> None:
    slots = await db.insert(past_slots(55))
    poison, healthy = slots[:35], slots[35:]  # 35 poison rows: more than 3 batches of 10
    await db.install_poison_trigger(ids(poison), "P0001")
    books = await FaultBooks.open(db, slots, record_fault)
    worker = ClockedCycles(db.url, BATCH, witness=True)

    first, second = await worker.tick(), await worker.tick()
    await fix_the_data(db)
    fixed_for = await tick_until_drained(db, books.ledger, worker)

    audit = books.close(
        await db.rows(),
        [],
        reported=worker.reported_expired,
        fault="more poison rows at the head than three batches",
        injection=f"a trigger rejects the 35 oldest rows (3.5 batches of {BATCH}); 20 healthy "
        "behind; fixed after 2 cycles",
        recovery=None,
        note=f"healthy rows: {first.expired_count} + {second.expired_count} in the first two "
        f"cycles (the normal rate); the poison rows expired within {fixed_for} s "
        "(worker clock) of the fix",
    )
    assert ids([*first.expired, *second.expired]) == ids(healthy)  # oldest first, full batches
    assert failed_per_cycle(worker)[:2] == [ids(poison), ids(poison)]
    assert audit.clean, audit.describe()
