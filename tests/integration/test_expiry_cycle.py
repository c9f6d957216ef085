"""One cycle on a real PostgreSQL: the spec's "One cycle" section, rule by rule."""

from __future__ import annotations

from datetime import timedelta

import pytest

from slot_expiration.db import SchemaMissingError, TransientStoreError
from slot_expiration.domain import SlotStatus
from slot_expiration.expiry.store import CycleStore
from tests.support.cycles import run_cycle
from tests.support.database import LIMITS, SlotDatabase, install_deferred_trigger, rows_locked
from tests.support.slots import AS_OF, make_slot, past_slots
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


async def test_empty_batch_succeeds_without_writes(db: SlotDatabase) -> None:
    await db.insert(
        [
            make_slot(timedelta(minutes=5)),
            make_slot(timedelta(minutes=-5), SlotStatus.BOOKED),
            make_slot(timedelta(minutes=-5), SlotStatus.EXPIRED),
            make_slot(timedelta(minutes=-5), SlotStatus.ARCHIVED),
        ]
    )
    before = await db.rows()

    result = await run_cycle(db.url)

    assert (result.expired_count, result.skipped_locked_count, result.failed_count) == (0, 0, 0)
    assert await db.rows() == before  # same xmin: not one row was even rewritten


async def test_expiry_sets_expired_updated_at_as_of_and_version_plus_one(db: SlotDatabase) -> None:
    slots = await db.insert([make_slot(timedelta(minutes=-m), version=3) for m in (1, 60, 600)])
    on_the_dot = (await db.insert([make_slot(timedelta(0))]))[0]

    result = await run_cycle(db.url)

    rows = await db.rows()
    assert result.expired_count == 4
    for slot in [*slots, on_the_dot]:
        assert rows[slot.id].status is SlotStatus.EXPIRED
        assert rows[slot.id].updated_at == AS_OF
        assert rows[slot.id].version == slot.version + 1


async def test_second_pass_changes_nothing(db: SlotDatabase) -> None:
    await db.insert(past_slots(5))
    await run_cycle(db.url)
    after_first = await db.rows()

    second = await run_cycle(db.url)

    assert second.expired_count == 0
    assert await db.rows() == after_first


async def test_future_slot_is_not_expired(db: SlotDatabase) -> None:
    future = (await db.insert([make_slot(timedelta(seconds=1))]))[0]

    await run_cycle(db.url)

    assert (await db.statuses())[future.id] is SlotStatus.AVAILABLE


@pytest.mark.parametrize("status", [SlotStatus.BOOKED, SlotStatus.EXPIRED, SlotStatus.ARCHIVED])
async def test_booked_expired_and_archived_slots_are_never_selected(
    db: SlotDatabase, status: SlotStatus
) -> None:
    untouchable = await db.insert(past_slots(3, status))
    before = await db.rows()

    result = await run_cycle(db.url)

    assert result.selected_count == 0
    after = await db.rows()
    assert all(after[s.id] == before[s.id] for s in untouchable)


async def test_batch_takes_the_oldest_start_first_and_leaves_the_rest(db: SlotDatabase) -> None:
    slots = await db.insert(past_slots(10))  # oldest first

    result = await run_cycle(db.url, batch_size=4, witness=True)

    statuses = await db.statuses()
    assert [s.id for s in result.expired] == [s.id for s in slots[:4]]
    assert all(statuses[s.id] is SlotStatus.EXPIRED for s in slots[:4])
    assert all(statuses[s.id] is SlotStatus.AVAILABLE for s in slots[4:])


async def test_result_carries_tenant_of_each_expired_slot(db: SlotDatabase) -> None:
    slots = await db.insert(past_slots(3))

    result = await run_cycle(db.url, witness=True)

    assert {(r.id, r.tenant_id) for r in result.expired} == {(s.id, s.tenant_id) for s in slots}


@pytest.mark.parametrize(
    ("sqlstate", "kind"),
    [("P0001", "trigger"), ("23514", "check constraint"), ("22008", "data error")],
)
async def test_poison_row_is_left_available_and_rest_commits(
    db: SlotDatabase, sqlstate: str, kind: str
) -> None:
    slots = await db.insert(past_slots(6))
    poison = [slots[1], slots[4]]
    await db.install_poison_trigger([p.id for p in poison], sqlstate)

    result = await run_cycle(db.url)

    rows = await db.rows()
    healthy = [s for s in slots if s not in poison]
    assert result.expired_count == 4, kind
    assert {f.slot.id for f in result.failures} == {p.id for p in poison}
    assert {f.sqlstate for f in result.failures} == {sqlstate}
    assert all(rows[s.id].status is SlotStatus.EXPIRED for s in healthy)
    assert all(rows[p.id].status is SlotStatus.AVAILABLE for p in poison)
    assert all(rows[p.id].version == p.version for p in poison)


async def test_poison_row_rejected_only_at_commit_is_isolated_too(db: SlotDatabase) -> None:
    slots = await db.insert(past_slots(5))
    poison = slots[2]
    await install_deferred_trigger(
        db,
        f"IF NEW.id = '{poison.id}' THEN "
        "RAISE EXCEPTION 'deferred check refuses' USING ERRCODE = '23514'; END IF;",
    )

    result = await run_cycle(db.url)

    statuses = await db.statuses()
    assert [f.slot.id for f in result.failures] == [poison.id]
    assert result.expired_count == 4
    assert statuses[poison.id] is SlotStatus.AVAILABLE
    assert all(statuses[s.id] is SlotStatus.EXPIRED for s in slots if s is not poison)


async def test_poison_rows_at_the_head_do_not_hold_back_the_rows_behind(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(6))
    poison, healthy = slots[:2], slots[2:]
    await db.install_poison_trigger([p.id for p in poison], "P0001")

    result = await run_cycle(db.url, batch_size=2, witness=True)

    assert [r.id for r in result.expired] == [s.id for s in healthy[:2]]
    assert {f.slot.id for f in result.failures} == {p.id for p in poison}


@pytest.mark.parametrize("sqlstate", ["40001", "57014", "53200"])
async def test_infrastructure_error_rolls_back_the_whole_batch(
    db: SlotDatabase, sqlstate: str
) -> None:
    slots = await db.insert(past_slots(5))
    await db.install_poison_trigger([slots[3].id], sqlstate)
    before = await db.rows()

    with pytest.raises(TransientStoreError):
        await run_cycle(db.url)

    assert await db.rows() == before
    assert await db.worker_locks() == 0


async def test_skipped_locked_count_is_exact_while_another_transaction_holds_rows(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(20))
    held = [slots[0], slots[3], slots[7]]  # inside the window of a batch of 10

    async with rows_locked(db.url, [s.id for s in held]):
        result = await run_cycle(db.url, batch_size=10, witness=True)

    free = [s for s in slots if s not in held]
    assert result.skipped_locked_count == 3
    assert [r.id for r in result.expired] == [s.id for s in free[:10]]
    statuses = await db.statuses()
    assert all(statuses[s.id] is SlotStatus.AVAILABLE for s in held)


async def test_locked_rows_beyond_the_batch_window_are_not_counted(db: SlotDatabase) -> None:
    slots = await db.insert(past_slots(20))

    async with rows_locked(db.url, [slots[15].id, slots[19].id]):
        result = await run_cycle(db.url, batch_size=10)

    assert result.expired_count == 10
    assert result.skipped_locked_count == 0


async def test_when_every_candidate_is_locked_all_are_counted_skipped(db: SlotDatabase) -> None:
    slots = await db.insert(past_slots(4))

    async with rows_locked(db.url, [s.id for s in slots]):
        result = await run_cycle(db.url, batch_size=10)

    assert (result.expired_count, result.skipped_locked_count) == (0, 4)


async def test_the_result_reports_the_backlog_left_due_after_the_cycle(db: SlotDatabase) -> None:
    await db.insert([*past_slots(12), make_slot(timedelta(minutes=1))])
    await db.insert(past_slots(2, SlotStatus.BOOKED))

    outcome = await run_cycle(db.url, batch_size=5)

    assert outcome.result.backlog == 7
    assert outcome.result.summary()["backlog"] == 7


async def test_the_backlog_count_stops_at_its_cap(db: SlotDatabase) -> None:
    await db.insert(past_slots(9))

    async with CycleStore.connect(db.url, LIMITS) as store, store.transaction():
        capped = await store.count_backlog_capped(AS_OF, cap=4)
        full = await store.count_backlog_capped(AS_OF, cap=100)

    assert (capped, full) == (4, 9)


async def test_cycle_releases_every_row_lock_when_it_ends(db: SlotDatabase) -> None:
    await db.insert(past_slots(10))

    await run_cycle(db.url)

    # The server ends a backend a moment after its client closed the connection.
    async def released() -> bool:
        return await db.worker_sessions() == 0 and await db.worker_locks() == 0

    await eventually(released, timeout_seconds=10)


async def test_missing_schema_is_reported_as_such(empty_database_url: str) -> None:
    with pytest.raises(SchemaMissingError, match="migrate"):
        await run_cycle(empty_database_url)
