"""The drain's throttle on a real PostgreSQL: the standbys read through
slot_expiration_standbys() with the least privilege `grant` gives (EXECUTE on it, nothing of
pg_read_all_stats), a role without it goes on and says so once, the nice ratio rests in
proportion to each batch's time, and the history keeps what a cycle waited.

A real standby holding a drain back is tests/faults/test_replica_throttle.py's."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from datetime import timedelta

import psycopg
import pytest

from slot_expiration.domain import SlotStatus
from slot_expiration.expiry import (
    BatchCommitted,
    CycleEvent,
    CycleRun,
    DrainThrottled,
    ReplicaLagRead,
    StandbysNotJudged,
    StopReason,
)
from slot_expiration.expiry.throttle import StandbysUnseen, ThrottleReason
from slot_expiration.history.housekeeping import Housekeeping, record_cycle
from slot_expiration.history.store import CycleRecord
from slot_expiration.schema.grants import GrantMode, grant_privileges
from tests.support.cycles import make_cycle
from tests.support.database import SlotDatabase
from tests.support.roles import PasswordRole
from tests.support.slots import AS_OF, past_slots

pytestmark = pytest.mark.integration


def _events() -> tuple[list[CycleEvent], Callable[[CycleEvent], None]]:
    seen: list[CycleEvent] = []
    return seen, seen.append


def _pauses() -> tuple[list[float], Callable[[float], Awaitable[None]]]:
    """A pause that records how long it was asked to rest and returns at once."""
    asked: list[float] = []

    async def pause(seconds: float) -> None:
        asked.append(seconds)

    return asked, pause


async def _may_execute(url: str, role: str) -> bool:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(
            "SELECT has_function_privilege(%s, 'slot_expiration_standbys()', 'EXECUTE')",
            (role,),
        )
        row = await cursor.fetchone()
        assert row is not None
        return bool(row[0])


async def test_grant_gives_the_worker_the_standbys_function_and_the_reader_not(
    db: SlotDatabase, role: PasswordRole
) -> None:
    assert not await _may_execute(db.url, role.name)  # EXECUTE revoked from PUBLIC

    await grant_privileges(db.url, role.name, GrantMode.READ_ONLY)
    assert not await _may_execute(db.url, role.name)

    await grant_privileges(db.url, role.name)
    assert await _may_execute(db.url, role.name)


async def test_the_granted_worker_reads_the_standbys_before_each_batch_and_drains(
    db: SlotDatabase, role: PasswordRole
) -> None:
    slots = await db.insert(past_slots(12))
    await grant_privileges(db.url, role.name)
    ticks = itertools.count()  # a clock that moves one second each time it is read
    cycle = make_cycle(
        role.url_for(db.url),
        5,
        max_batches=0,
        max_replica_lag_seconds=10,
        monotonic=lambda: float(next(ticks)),
    )
    seen, emit = _events()

    result = await cycle.run(CycleRun(AS_OF, emit=emit))

    reads = [e for e in seen if isinstance(e, ReplicaLagRead)]
    assert [e.lag_seconds for e in reads] == [0.0, 0.0, 0.0]  # no standby: never behind
    assert not [e for e in seen if isinstance(e, StandbysNotJudged | DrainThrottled)]
    assert (result.expired_count, result.stop_reason) == (12, StopReason.DRAINED)
    assert set((await db.statuses()).values()) == {SlotStatus.EXPIRED}
    assert len(slots) == 12


async def test_a_reading_within_limits_serves_the_batches_of_the_next_quarter_second(
    db: SlotDatabase,
) -> None:
    await db.insert(past_slots(12))
    cycle = make_cycle(db.url, 5, max_batches=0, max_replica_lag_seconds=10, monotonic=lambda: 0.0)
    seen, emit = _events()

    result = await cycle.run(CycleRun(AS_OF, emit=emit))

    assert len([e for e in seen if isinstance(e, ReplicaLagRead)]) == 1  # 3 batches, 1 read
    assert result.expired_count == 12


async def test_a_role_that_may_not_read_the_standbys_drains_and_says_so_once(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await db.insert(past_slots(12))
    await grant_privileges(db.url, role.name)
    await db.execute(f"REVOKE EXECUTE ON FUNCTION slot_expiration_standbys() FROM {role.name}")
    cycle = make_cycle(role.url_for(db.url), 5, max_batches=0, max_replica_lag_seconds=10)
    seen, emit = _events()

    result = await cycle.run(CycleRun(AS_OF, emit=emit))

    unseen = [e for e in seen if isinstance(e, StandbysNotJudged)]
    assert [e.why for e in unseen] == [StandbysUnseen.NOT_GRANTED]
    assert not [e for e in seen if isinstance(e, ReplicaLagRead)]
    assert (result.expired_count, result.throttled_seconds) == (12, 0.0)


async def test_the_nice_ratio_rests_that_many_times_each_batch_before_the_next(
    db: SlotDatabase,
) -> None:
    await db.insert(past_slots(14))
    cycle = make_cycle(db.url, 5, max_batches=0, drain_nice_ratio=1.5)
    seen, emit = _events()
    asked, pause = _pauses()

    result = await cycle.run(CycleRun(AS_OF, emit=emit, pause=pause))

    batches = [e.batch for e in seen if isinstance(e, BatchCommitted)]
    assert [b.expired_count for b in batches] == [5, 5, 4]
    # A rest after each batch that leaves more to do, none after the last (short) one.
    expected = [1.5 * b.duration_ms / 1000.0 for b in batches[:2]]
    assert asked == pytest.approx(expected)
    nice = [e for e in seen if isinstance(e, DrainThrottled)]
    assert [e.reason for e in nice] == [ThrottleReason.NICE] * 2
    assert [e.seconds for e in nice] == pytest.approx(expected)
    assert result.throttled_seconds == pytest.approx(sum(expected))
    assert result.throttled_by is ThrottleReason.NICE


async def test_no_ratio_no_rest(db: SlotDatabase) -> None:
    await db.insert(past_slots(14))
    asked, pause = _pauses()

    result = await make_cycle(db.url, 5, max_batches=0).run(CycleRun(AS_OF, pause=pause))

    assert (asked, result.throttled_seconds, result.throttled_by) == ([], 0.0, None)


async def test_the_history_keeps_what_a_cycle_waited_and_why(db: SlotDatabase) -> None:
    await db.insert(past_slots(14))
    asked, pause = _pauses()
    result = await make_cycle(db.url, 5, max_batches=0, drain_nice_ratio=2.0).run(
        CycleRun(AS_OF, pause=pause)
    )
    record = CycleRecord.of(
        result, instance="test", ended_at=AS_OF, shift=timedelta(0), error=None, error_text=None
    )

    await record_cycle(Housekeeping(db.url, timedelta(days=14)), record)

    async with await psycopg.AsyncConnection.connect(db.url) as conn:
        cursor = await conn.execute(
            "SELECT throttled_seconds, throttled_by FROM slot_expiration_cycles"
        )
        rows = await cursor.fetchall()
    assert rows == [(pytest.approx(sum(asked)), "nice")]
    assert sum(asked) > 0
