"""Session safety: a table lock costs one failed cycle, a dead network costs no more
than the budget and a short grace, and no row lock outlives either."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
import pytest

from slot_expiration.db import TransactionLimits, TransientStoreError
from slot_expiration.domain import CycleOutcome, SlotStatus
from slot_expiration.expiry import CycleFailed, CycleResult, run_cycle
from slot_expiration.expiry.store import CycleStore, Selection
from slot_expiration.options import load_options
from slot_expiration.worker import build_cycle
from tests.support.database import GATE_KEY, SlotDatabase, install_deferred_trigger
from tests.support.doubles import RecordingSink
from tests.support.slots import AS_OF, past_slots
from tests.support.tcp_proxy import FreezableProxy
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

BUDGET_SECONDS = 2.0


async def one_cycle(url: str, lock_timeout_seconds: float = 2.0) -> CycleResult:
    settings = load_options(
        database_url=url,
        max_cycle_seconds=BUDGET_SECONDS,
        lock_timeout_seconds=lock_timeout_seconds,
    )
    return await run_cycle(build_cycle(settings), RecordingSink(), BUDGET_SECONDS, AS_OF)


@asynccontextmanager
async def table_locked(url: str) -> AsyncIterator[None]:
    """Another session holds the table lock a migration would take."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute("LOCK TABLE availability_slots IN ACCESS EXCLUSIVE MODE")
        yield
        await conn.rollback()


async def gate_waiters(db: SlotDatabase) -> bool:
    return await db.worker_sessions(waiting_on_gate=True) == 1


async def test_a_table_lock_held_elsewhere_fails_the_cycle_on_lock_timeout_not_the_budget(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(5))

    async with table_locked(db.url):
        with pytest.raises(CycleFailed, match="lock timeout") as failed:
            await one_cycle(db.url, lock_timeout_seconds=0.2)
    assert isinstance(failed.value.error, TransientStoreError)
    after = await one_cycle(db.url, lock_timeout_seconds=0.2)

    assert after.expired_count == len(slots)


async def test_a_cycle_on_a_frozen_network_ends_while_the_network_is_still_dead(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(10))
    await db.install_gate_trigger()
    await db.close_gate()
    async with FreezableProxy.serving(db.url) as proxy:
        cycle = asyncio.create_task(one_cycle(proxy.url_through(db.url)))
        await eventually(lambda: gate_waiters(db))
        proxy.freeze()
        await db.open_gate()  # the batch goes on at the server; its answer never arrives

        # Its COMMIT went with it, in one round trip: whether it ran is the server's to say.
        with pytest.raises(CycleFailed, match="may or may not have committed") as overrun:
            await cycle
        assert overrun.value.outcome is CycleOutcome.BUDGET_EXCEEDED
        assert overrun.value.ended.result.expired_count == 0  # nothing reported unknown

        assert proxy.frozen  # it did not wait for the network to come back

    async def released() -> bool:
        return await db.worker_locks() == 0

    await eventually(released)
    # Whole or nothing, and each row once: the next cycle expires what is left.
    assert len(set((await db.statuses()).values())) == 1
    await one_cycle(db.url)
    rows = await db.rows()
    assert all(rows[s.id].status is SlotStatus.EXPIRED for s in slots)
    assert all(rows[s.id].version == s.version + 1 for s in slots)


async def test_a_commit_whose_answer_never_comes_is_in_doubt_yet_each_row_changes_once(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(6))
    await install_deferred_trigger(db, f"PERFORM pg_advisory_xact_lock_shared({GATE_KEY});")
    await db.close_gate()
    async with FreezableProxy.serving(db.url) as proxy:
        cycle = asyncio.create_task(one_cycle(proxy.url_through(db.url)))
        await eventually(lambda: gate_waiters(db))  # inside COMMIT: deferred triggers run there
        proxy.freeze()

        with pytest.raises(CycleFailed, match="may or may not have committed") as doubt:
            await cycle
        assert doubt.value.outcome is CycleOutcome.BUDGET_EXCEEDED

        await db.open_gate()

    async def settled() -> bool:
        return await db.worker_locks() == 0

    await eventually(settled)
    # Whole or nothing: the batch committed, or the server's budget rolled it back.
    assert len(set((await db.statuses()).values())) == 1
    await one_cycle(db.url)
    rows = await db.rows()
    assert all(rows[s.id].status is SlotStatus.EXPIRED for s in slots)
    assert all(rows[s.id].version == s.version + 1 for s in slots)


async def test_every_transaction_carries_the_worker_limits_itself(db: SlotDatabase) -> None:
    limits = TransactionLimits(
        statement_timeout_ms=30_000, lock_timeout_ms=2_000, idle_in_transaction_timeout_ms=30_000
    )
    seen = []
    async with CycleStore.connect(db.url, limits) as store:
        for _ in range(2):  # on a pooler, each transaction may land on another server session
            async with store.transaction():
                await store.count_backlog(AS_OF)  # the first statement carries the opening
                seen.append(await store_settings(store))

    assert seen == [("30s", "30s", "2s")] * 2


async def store_settings(store: CycleStore) -> tuple[str, str, str]:
    conn = store.session.connection
    cursor = await conn.execute(
        "SELECT current_setting('statement_timeout'), "
        "current_setting('idle_in_transaction_session_timeout'), current_setting('lock_timeout')"
    )
    row = await cursor.fetchone()
    assert row is not None
    return (row[0], row[1], row[2])


@pytest.mark.parametrize(("wanted", "prepared"), [(False, 0), (True, 1)])
async def test_statements_are_prepared_on_the_server_only_when_asked(
    db: SlotDatabase, wanted: bool, prepared: int
) -> None:
    await db.insert(past_slots(30))
    limits = TransactionLimits(
        statement_timeout_ms=30_000, lock_timeout_ms=2_000, idle_in_transaction_timeout_ms=30_000
    )
    async with CycleStore.connect(db.url, limits, prepare=wanted) as store:
        for _ in range(3):  # a drain repeats the batch statement
            await store.expire_batch(Selection(AS_OF, AS_OF, 5))
        conn = store.session.connection
        cursor = await conn.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%%picked%%'"
        )
        row = await cursor.fetchone()

    assert row == (prepared,)


@pytest.mark.parametrize("prepare", [False, True], ids=["opening-deferred", "opening-sent"])
async def test_a_dry_run_transaction_rolls_back_what_it_did_and_says_it_did_not_commit(
    db: SlotDatabase, prepare: bool
) -> None:
    slots = past_slots(3)
    await db.insert(slots)
    limits = TransactionLimits(
        statement_timeout_ms=30_000, lock_timeout_ms=2_000, idle_in_transaction_timeout_ms=30_000
    )
    async with CycleStore.connect(db.url, limits, prepare=prepare) as store:
        async with store.session.transaction(dry_run=True) as outcome:
            assert await store.expire_slot(slots[0].id, AS_OF)
        async with store.transaction():
            left = await store.count_backlog(AS_OF)

    assert outcome.committed is False
    assert left == 3
