"""Nothing assumed: what a statement relies on holds in every session, not only when it was
checked once. Each transaction sets the time zone, the styles, the isolation and the
search_path its statements read; each session refuses an availability_slots other than the
one meant; each cycle re-checks the table contract's types and the checks on status, so a
change after adoption makes the cycle misconfigured, never a wrong expiry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from slot_expiration.db import MisconfiguredStoreError, SchemaMissingError
from slot_expiration.db.errors import WrongSlotTableError
from slot_expiration.db.session import ApplicationName, Session, SessionSettings
from slot_expiration.domain import SlotStatus
from slot_expiration.expiry.store import CycleStore
from slot_expiration.options.database_url import with_search_path
from slot_expiration.quarantine import QuarantineStore
from slot_expiration.schema.grants import GrantMode, grant_privileges
from slot_expiration.status import collect_status
from slot_expiration.status.store import StatusStore
from tests.support.cycles import run_cycle
from tests.support.database import LIMITS, SlotDatabase
from tests.support.roles import PasswordRole
from tests.support.slots import AS_OF, make_slot, past_slots

pytestmark = pytest.mark.integration

# What the session settings of a database can be, each unlike what the statements read.
ODD_SETTINGS = {
    "TimeZone": "Asia/Tokyo",
    "DateStyle": "SQL, DMY",
    "IntervalStyle": "sql_standard",
    "default_transaction_isolation": "serializable",
}
SHOWN = (
    "SELECT current_setting('TimeZone'), current_setting('DateStyle'), "
    "current_setting('IntervalStyle'), current_setting('transaction_isolation'), "
    "current_setting('search_path')"
)


async def set_for_database(db: SlotDatabase, **settings: str) -> None:
    """Every later session of the test's database starts with these settings."""
    name = await _value(db, "SELECT current_database()")
    for setting, value in settings.items():
        # A search_path is a list of names; every other setting here one value.
        given = sql.SQL(", ").join(
            [sql.Identifier(part.strip()) for part in value.split(",")]
            if setting == "search_path"
            else [sql.Literal(value)]
        )
        await db.execute(
            sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                sql.Identifier(name), sql.Identifier(setting), given
            )
        )


async def _value(db: SlotDatabase, query: str) -> Any:
    row = await (await db.conn.execute(query)).fetchone()
    assert row is not None
    return row[0]


async def test_each_transaction_sets_what_its_statements_read_whatever_the_session_had(
    db: SlotDatabase,
) -> None:
    await set_for_database(db, **ODD_SETTINGS)
    seen = []
    async with CycleStore.connect(db.url, LIMITS) as store:
        conn = store.session.connection
        before = await (await conn.execute(SHOWN)).fetchone()
        for _ in range(2):  # on a pooler, each transaction may land on another server session
            async with store.transaction():
                await store.count_backlog(AS_OF)
                seen.append(await (await conn.execute(SHOWN)).fetchone())
        after = await (await conn.execute(SHOWN)).fetchone()

    assert before is not None
    assert before[:4] == ("Asia/Tokyo", "SQL, DMY", "sql_standard", "serializable")
    assert seen == [("UTC", "ISO, MDY", "postgres", "read committed", before[4])] * 2
    assert after == before  # set for each transaction alone, never for the session


async def test_the_urls_search_path_holds_in_every_transaction_where_a_pooler_dropped_it(
    db: SlotDatabase,
) -> None:
    # A pooler with ignore_startup_parameters = options: the session starts on the
    # database's search_path, not the URL's; the URL's is set in each transaction.
    await db.execute("CREATE SCHEMA booking")
    settings = SessionSettings(ApplicationName.WORKER, limits=LIMITS, autocommit=True)
    async with await psycopg.AsyncConnection.connect(db.url, autocommit=True) as conn:
        session = Session(conn, settings, search_path='"booking"')
        async with session.transaction():
            await session.execute("cycle_clock")  # the first statement carries the opening
            inside = await (await conn.execute("SELECT current_setting('search_path')")).fetchone()
        outside = await (await conn.execute("SELECT current_setting('search_path')")).fetchone()

    assert session.search_path_requested
    assert inside == ('"booking"',)
    assert outside == ('"$user", public',)


async def test_a_search_path_that_finds_another_table_than_the_adopted_one_is_refused(
    db: SlotDatabase,
) -> None:
    # The calendar's table (public, recorded by migrate) and a second one, earlier on
    # the search_path a role's setting now gives every session.
    slots = await db.insert(past_slots(5))
    await db.execute("CREATE SCHEMA decoy")
    await db.execute("CREATE TABLE decoy.availability_slots (LIKE public.availability_slots)")
    await db.execute("INSERT INTO decoy.availability_slots SELECT * FROM availability_slots")
    await set_for_database(db, search_path="decoy, public")

    with pytest.raises(WrongSlotTableError) as refused:
        await run_cycle(db.url)
    with pytest.raises(WrongSlotTableError):
        async with StatusStore.connect(db.url, ApplicationName.STATUS):
            pass
    with pytest.raises(WrongSlotTableError):
        async with QuarantineStore.connect(db.url, LIMITS):
            pass

    assert str(refused.value).startswith(
        "the search_path (decoy, public) finds decoy.availability_slots, but migrate "
        "adopted public.availability_slots: point every command at it with --schema public"
    )
    assert str(refused.value).endswith("; nothing changed")
    decoy = await _value(
        db, "SELECT count(*) FROM decoy.availability_slots WHERE status = 'Available'"
    )
    assert decoy == len(slots)
    assert set((await db.statuses()).values()) == {SlotStatus.AVAILABLE}


async def test_a_grant_on_another_table_than_the_adopted_one_is_refused_and_changes_nothing(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await db.execute("CREATE SCHEMA decoy")
    await db.execute("CREATE TABLE decoy.availability_slots (LIKE public.availability_slots)")
    await set_for_database(db, search_path="decoy, public")

    with pytest.raises(WrongSlotTableError):
        await grant_privileges(db.url, role.name, GrantMode.WORKER)

    granted = await _value(
        db,
        f"SELECT count(*) FROM information_schema.role_table_grants WHERE grantee = '{role.name}'",
    )
    assert granted == 0


async def test_the_schema_named_in_the_urls_options_is_what_is_meant_over_the_record(
    db: SlotDatabase,
) -> None:
    # The calendar's schema renamed: --schema names it; the record follows at migrate.
    slots = await db.insert(past_slots(3))
    await db.execute("ALTER SCHEMA public RENAME TO calendar")
    url = _with_options(db.url, "-csearch_path=calendar")

    outcome = await run_cycle(url)

    assert outcome.expired_count == len(slots)


def _with_options(url: str, options: str) -> str:
    from slot_expiration.options.database_url import url_from_parts, url_parts  # noqa: PLC0415

    return url_from_parts({**url_parts(url), "options": options})


async def test_a_start_at_retyped_after_adoption_fails_the_cycle_naming_it_and_expires_nothing(
    db: SlotDatabase,
) -> None:
    # Slots starting up to nine hours after AS_OF: read as Tokyo's wall-clock time in a
    # `timestamp` column, a session in UTC would take them for past ones.
    due = await db.insert(past_slots(3))
    bookable = await db.insert([make_slot(timedelta(hours=h)) for h in (1, 5, 8)])
    await db.execute(
        "ALTER TABLE availability_slots ALTER COLUMN start_at TYPE timestamp "
        "USING start_at AT TIME ZONE 'Asia/Tokyo'"
    )
    await set_for_database(db, TimeZone="Asia/Tokyo")

    with pytest.raises(SchemaMissingError) as refused:
        await run_cycle(db.url)
    report = await collect_status(db.url, batch_size=500)

    assert "column start_at is timestamp without time zone, not timestamp with time zone" in (
        str(refused.value)
    )
    assert "restore it, migrate cannot" in str(refused.value)
    statuses = await db.statuses()
    assert {statuses[s.id] for s in [*due, *bookable]} == {SlotStatus.AVAILABLE}
    assert not isinstance(report.schema, Exception)
    assert (
        "column start_at is timestamp without time zone, not timestamp with time zone"
        in report.schema.contract_mismatches  # type: ignore[union-attr]
    )


async def test_a_check_that_refuses_expired_added_after_adoption_fails_the_cycle_unquarantined(
    db: SlotDatabase,
) -> None:
    await db.insert(past_slots(20))
    await db.execute(
        "ALTER TABLE availability_slots ADD CONSTRAINT no_expiry "
        "CHECK (status <> 'Expired') NOT VALID"
    )

    with pytest.raises(SchemaMissingError) as refused:
        await run_cycle(db.url)

    assert "check constraint no_expiry refuses status 'Expired'" in str(refused.value)
    assert await db.quarantine() == {}
    assert set((await db.statuses()).values()) == {SlotStatus.AVAILABLE}


@asynccontextmanager
async def row_security(db: SlotDatabase, role: str) -> AsyncIterator[None]:
    """Row-level security on the slots: a permissive policy shows `role` every row, a
    restrictive one (a tenant's) hides all but one tenant's."""
    await db.execute("ALTER TABLE availability_slots ENABLE ROW LEVEL SECURITY")
    await db.execute(
        sql.SQL("CREATE POLICY everything ON availability_slots TO {} USING (true)").format(
            sql.Identifier(role)
        )
    )
    await db.execute(
        "CREATE POLICY one_tenant ON availability_slots AS RESTRICTIVE "
        "USING (tenant_id = '00000000-0000-0000-0000-000000000001')"
    )
    yield


async def test_a_restrictive_policy_that_hides_rows_is_named_with_advice_that_helps(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await db.insert(past_slots(4))
    await grant_privileges(db.url, role.name, GrantMode.WORKER)
    async with row_security(db, role.name):
        with pytest.raises(MisconfiguredStoreError) as refused:
            await run_cycle(role.url_for(db.url))

    message = str(refused.value)
    assert "the restrictive row-level security policy one_tenant on availability_slots" in message
    assert "no permissive policy" not in message  # the permissive one shows every row
    assert f"apply it to the calendar's roles but not {role.name}" in message
    assert set((await db.statuses()).values()) == {SlotStatus.AVAILABLE}


async def test_status_sizes_a_plain_table_after_analyze(db: SlotDatabase) -> None:
    await db.insert(past_slots(300))
    await db.execute("ANALYZE availability_slots")

    async with StatusStore.connect(db.url, ApplicationName.STATUS) as store:
        size = await store.table_size()

    assert size.rows_estimate == 300
    assert size.total_bytes > 8192


@pytest.mark.parametrize("schema", ["my book", "tab\there", "line\nbreak", "back\\slash"])
async def test_a_schema_named_with_whitespace_reaches_the_server_whole(
    db: SlotDatabase, schema: str
) -> None:
    # The server splits the URL's options at whitespace: each one is escaped.
    await db.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    url = with_search_path(db.url, schema)

    async with await psycopg.AsyncConnection.connect(url) as conn:
        row = await (await conn.execute("SELECT current_schemas(false)")).fetchone()

    assert row == ([schema],)
