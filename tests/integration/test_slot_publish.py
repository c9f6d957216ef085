"""Publish a batch: 1..500 slots, in the future, within the horizon, no overlap; all or
nothing, every conflict named (real PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID, uuid4

import pytest

from slot_expiration.domain import SlotStatus
from slot_expiration.slots import (
    BatchTooLargeError,
    BeyondHorizonError,
    EmptyBatchError,
    InvalidRangeError,
    SlotOperations,
    SlotOverlapError,
    SlotPolicy,
    SlotTooLongError,
    StartNotInFutureError,
)
from tests.support.cycles import run_cycle
from tests.support.database import SlotDatabase
from tests.support.slot_context import Clock, every_hour, in_minutes, operations
from tests.support.slots import AS_OF

pytestmark = pytest.mark.integration

TENANT, CONSULTANT = uuid4(), uuid4()


async def publish(ops: SlotOperations, *ranges_in_minutes: tuple[float, float]) -> list[UUID]:
    batch = [in_minutes(start, length) for start, length in ranges_in_minutes]
    return [slot.id for slot in await ops.publish(TENANT, CONSULTANT, batch)]


async def test_a_batch_is_published_available_version_1_in_its_order(db: SlotDatabase) -> None:
    batch = [in_minutes(300), in_minutes(120), in_minutes(200, 45)]
    async with operations(db.url) as ops:
        published = await ops.publish(TENANT, CONSULTANT, batch)

    assert [(s.start_at, s.end_at) for s in published] == [(r.start_at, r.end_at) for r in batch]
    assert {(s.tenant_id, s.consultant_id) for s in published} == {(TENANT, CONSULTANT)}
    assert {(s.status, s.version) for s in published} == {(SlotStatus.AVAILABLE, 1)}
    assert {(s.created_at, s.updated_at) for s in published} == {(AS_OF, AS_OF)}
    rows = await db.rows()
    assert set(rows) == {s.id for s in published}
    assert {(row.status, row.version) for row in rows.values()} == {(SlotStatus.AVAILABLE, 1)}


async def test_500_slots_are_one_publication(db: SlotDatabase) -> None:
    async with operations(db.url) as ops:
        published = await ops.publish(TENANT, CONSULTANT, every_hour(500))

    assert len(published) == 500
    assert len(await db.rows()) == 500


async def test_501_slots_are_refused_as_too_large_and_nothing_is_written(db: SlotDatabase) -> None:
    async with operations(db.url) as ops:
        with pytest.raises(BatchTooLargeError) as refused:
            await ops.publish(TENANT, CONSULTANT, every_hour(501))

    assert refused.value.code == "CAL_SLOT_BATCH_TOO_LARGE"
    assert (refused.value.count, refused.value.limit) == (501, 500)
    assert await db.rows() == {}


async def test_an_empty_batch_is_refused(db: SlotDatabase) -> None:
    async with operations(db.url) as ops:
        with pytest.raises(EmptyBatchError) as refused:
            await ops.publish(TENANT, CONSULTANT, [])

    assert refused.value.code == "CAL_SLOT_BATCH_EMPTY"


async def test_a_slot_that_does_not_end_after_its_start_is_refused_by_position(
    db: SlotDatabase,
) -> None:
    async with operations(db.url) as ops:
        with pytest.raises(InvalidRangeError) as refused:
            await publish(ops, (120, 30), (200, 0), (300, -15))

    assert refused.value.code == "CAL_SLOT_INVALID_RANGE"
    assert [position for position, _ in refused.value.slots] == [2, 3]
    assert await db.rows() == {}


async def test_a_slot_longer_than_24_hours_refuses_the_whole_batch_and_one_of_24_passes(
    db: SlotDatabase,
) -> None:
    day = 24 * 60
    async with operations(db.url) as ops:
        with pytest.raises(SlotTooLongError) as refused:
            await publish(ops, (120, 30), (day, day + 1 / 60), (300, 111 * day))
        whole_day = await publish(ops, (day, day))

    assert refused.value.code == "CAL_SLOT_TOO_LONG"
    assert [position for position, _ in refused.value.slots] == [2, 3]
    assert set(await db.rows()) == set(whole_day)


async def test_a_slot_starting_now_or_before_is_refused(db: SlotDatabase) -> None:
    async with operations(db.url) as ops:
        with pytest.raises(StartNotInFutureError) as refused:
            await publish(ops, (0, 30), (-60, 30), (1, 30))

    assert refused.value.code == "CAL_SLOT_START_IN_PAST"
    assert [position for position, _ in refused.value.slots] == [1, 2]
    assert await db.rows() == {}


async def test_a_slot_starting_past_the_horizon_is_refused_and_one_at_it_is_not(
    db: SlotDatabase,
) -> None:
    policy = SlotPolicy(horizon=timedelta(days=7))
    horizon_minutes = 7 * 24 * 60
    async with operations(db.url, policy=policy) as ops:
        with pytest.raises(BeyondHorizonError) as refused:
            await publish(ops, (horizon_minutes + 1, 30))
        at_horizon = await publish(ops, (horizon_minutes, 30))

    assert refused.value.code == "CAL_SLOT_BEYOND_HORIZON"
    assert refused.value.latest_start == AS_OF + timedelta(days=7)
    assert len(at_horizon) == 1


async def test_the_default_horizon_is_90_days(db: SlotDatabase) -> None:
    async with operations(db.url) as ops:
        with pytest.raises(BeyondHorizonError):
            await publish(ops, (90 * 24 * 60 + 1, 30))


async def test_overlaps_within_the_batch_are_all_named_and_nothing_is_written(
    db: SlotDatabase,
) -> None:
    async with operations(db.url) as ops:
        with pytest.raises(SlotOverlapError) as refused:
            await publish(ops, (120, 60), (500, 30), (150, 30), (170, 30))

    assert refused.value.code == "CAL_SLOT_OVERLAP"
    pairs = [(c.position, c.other_position) for c in refused.value.conflicts]
    assert pairs == [(1, 3), (1, 4), (3, 4)]
    assert "#1 " in str(refused.value)
    assert "#4 " in str(refused.value)
    assert await db.rows() == {}


async def test_touching_slots_do_not_overlap(db: SlotDatabase) -> None:
    async with operations(db.url) as ops:
        first = await publish(ops, (120, 30), (150, 30))
        second = await publish(ops, (180, 30), (90, 30))

    assert len(first + second) == 4


async def test_every_available_or_booked_slot_in_the_way_is_named_and_nothing_is_written(
    db: SlotDatabase,
) -> None:
    async with operations(db.url) as ops:
        available, booked, _free = await publish(ops, (120, 30), (180, 30), (240, 30))
        await ops.book(TENANT, booked, min_lead_time=timedelta(0))
        with pytest.raises(SlotOverlapError) as refused:
            await publish(ops, (130, 60), (300, 30), (200, 30))

    conflicts = refused.value.conflicts
    assert [(c.position, c.existing_id, c.existing_status) for c in conflicts] == [
        (1, available, SlotStatus.AVAILABLE),
        (1, booked, SlotStatus.BOOKED),
        (3, booked, SlotStatus.BOOKED),
    ]
    assert str(available) in str(refused.value)
    assert str(booked) in str(refused.value)
    assert len(await db.rows()) == 3


async def test_expired_and_archived_slots_never_block_a_publication(db: SlotDatabase) -> None:
    clock = Clock()
    async with operations(db.url, clock) as ops:
        expired, archived = await publish(ops, (60, 30), (120, 30))
        await ops.archive(TENANT, archived)
        await run_cycle(db.url, as_of=AS_OF + timedelta(minutes=60))
        republished = await publish(ops, (60, 30), (120, 30))

    statuses = await db.statuses()
    assert (statuses[expired], statuses[archived]) == (SlotStatus.EXPIRED, SlotStatus.ARCHIVED)
    assert {statuses[slot_id] for slot_id in republished} == {SlotStatus.AVAILABLE}


async def test_another_consultant_or_tenant_at_the_same_time_does_not_block(
    db: SlotDatabase,
) -> None:
    batch = [in_minutes(120)]
    async with operations(db.url) as ops:
        await ops.publish(TENANT, CONSULTANT, batch)
        other_consultant = await ops.publish(TENANT, uuid4(), batch)
        other_tenant = await ops.publish(uuid4(), CONSULTANT, batch)

    assert len(other_consultant + other_tenant) == 2
