"""The worker's transactions commit without waiting for the WAL flush (`synchronous_commit`
off, set locally), unless `--synchronous-commit` says otherwise; the calendar's own
transactions, and the worker's session after each transaction, keep the database's setting.

A test trigger records, for every row an UPDATE writes, the application that wrote it and
the transaction's `synchronous_commit` at that moment. The database's own default is set to
`on` (the suite's server runs with `off`), so the worker's setting is told apart from it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from slot_expiration.db import ApplicationName
from slot_expiration.expiry import run_cycle
from slot_expiration.expiry.store import CycleStore
from slot_expiration.options import SynchronousCommit, load_options
from slot_expiration.worker import build_cycle, transaction_limits
from tests.support.database import SlotDatabase
from tests.support.doubles import RecordingSink
from tests.support.slot_context import operations
from tests.support.slots import AS_OF, make_slot, past_slots

pytestmark = pytest.mark.integration

BUDGET_SECONDS = 10.0


async def record_commit_settings(db: SlotDatabase) -> None:
    """Every later session of this database starts with synchronous_commit on; every
    UPDATE of a slot records who wrote it and the transaction's setting."""
    async with await psycopg.AsyncConnection.connect(db.url, autocommit=True) as conn:
        name = (await (await conn.execute("SELECT current_database()")).fetchone() or [""])[0]
        await conn.execute(
            sql.SQL("ALTER DATABASE {} SET synchronous_commit = on").format(sql.Identifier(name))
        )
    await db.execute("CREATE TABLE commit_settings (application text, setting text)")
    await db.execute(
        "CREATE FUNCTION record_commit_setting() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "INSERT INTO commit_settings VALUES (current_setting('application_name'), "
        "current_setting('synchronous_commit')); RETURN NEW; END $$"
    )
    await db.execute(
        "CREATE TRIGGER record_commit_setting AFTER UPDATE ON availability_slots "
        "FOR EACH ROW EXECUTE FUNCTION record_commit_setting()"
    )


async def commit_settings(db: SlotDatabase) -> set[tuple[str, str]]:
    cursor = await db.conn.execute("SELECT DISTINCT application, setting FROM commit_settings")
    return {(str(app), str(setting)) for app, setting in await cursor.fetchall()}


async def show_commit_setting(conn: psycopg.AsyncConnection[Any]) -> str:
    row = await (await conn.execute("SHOW synchronous_commit")).fetchone()
    assert row is not None
    return str(row[0])


async def one_cycle(url: str, **options: Any) -> int:
    settings = load_options(database_url=url, max_cycle_seconds=BUDGET_SECONDS, **options)
    result = await run_cycle(build_cycle(settings), RecordingSink(), BUDGET_SECONDS, AS_OF)
    return result.expired_count


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, "off"),  # the default
        ({"synchronous_commit": "on"}, "on"),
        ({"synchronous_commit": "local"}, "local"),
        ({"synchronous_commit": "remote_apply"}, "remote_apply"),
    ],
)
async def test_the_worker_batches_commit_with_its_own_setting_and_a_booking_with_the_database(
    db: SlotDatabase, given: dict[str, Any], expected: str
) -> None:
    await db.insert(past_slots(7))
    future = (await db.insert([make_slot(timedelta(days=3))]))[0]
    await record_commit_settings(db)

    expired = await one_cycle(
        db.url, batch_size=3, drain_batch_size=3, max_batches_per_cycle=0, **given
    )
    async with operations(db.url) as slots:
        await slots.book(future.tenant_id, future.id)

    assert expired == 7
    assert await commit_settings(db) == {
        (ApplicationName.WORKER, expected),
        (ApplicationName.SLOTS, "on"),
    }


async def test_a_poison_row_is_quarantined_in_a_transaction_of_the_worker_setting(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(4))
    await db.install_poison_trigger([slots[1].id], "P0001")
    await record_commit_settings(db)

    expired = await one_cycle(db.url)

    assert expired == 3
    assert await commit_settings(db) == {(ApplicationName.WORKER, "off")}
    assert set(await db.quarantine()) == {slots[1].id}


async def test_the_setting_is_the_transaction_own_and_the_session_keeps_the_database_setting(
    db: SlotDatabase,
) -> None:
    await record_commit_settings(db)
    limits = transaction_limits(load_options(database_url=db.url))

    async with CycleStore.connect(db.url, limits) as store:
        async with store.transaction():
            await store.count_backlog(AS_OF)  # the first statement carries the opening
            inside = await show_commit_setting(store.session.connection)
        after = await show_commit_setting(store.session.connection)

    assert limits.synchronous_commit == SynchronousCommit.OFF
    assert (inside, after) == ("off", "on")
