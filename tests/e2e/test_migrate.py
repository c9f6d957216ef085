"""`slot-expiration migrate` against a real database: empty, the calendar's table to
adopt (or refuse), a schema ahead of this release; and `--sql`, run by psql."""

from __future__ import annotations

import subprocess

import psycopg
import pytest
from psycopg import sql

from slot_expiration.embedded import find_bindir
from slot_expiration.options.database_url import with_search_path
from slot_expiration.schema.migrate import head_revision
from tests.e2e.command import PASSWORD, public_relations, run_command, with_password
from tests.support.calendar import (
    SELECTION_INDEX,
    IndexShape,
    calendar_snapshot,
    create_calendar_table,
    schema_shape,
    worker_relations,
)
from tests.support.database import SlotDatabase

pytestmark = pytest.mark.e2e

CONTRACT_COLUMNS = {
    ("id", "uuid", "NO"),
    ("tenant_id", "uuid", "NO"),
    ("consultant_id", "uuid", "NO"),
    ("start_at", "timestamp with time zone", "NO"),
    ("end_at", "timestamp with time zone", "NO"),
    ("status", "text", "NO"),
    ("version", "integer", "NO"),
    ("created_at", "timestamp with time zone", "NO"),
    ("updated_at", "timestamp with time zone", "NO"),
}


async def _slot_table_shape(url: str) -> tuple[set[tuple[str, str, str]], set[str]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        columns = await conn.execute(
            "SELECT column_name::text, data_type::text, is_nullable::text "
            "FROM information_schema.columns WHERE table_name = 'availability_slots'"
        )
        indexes = await conn.execute(
            "SELECT indexname::text FROM pg_indexes WHERE tablename = 'availability_slots'"
        )
        return (
            {(r[0], r[1], r[2]) for r in await columns.fetchall()},
            {r[0] for r in await indexes.fetchall()},
        )


async def test_migrate_creates_the_schema_once_and_a_second_run_changes_nothing(
    empty_database_url: str,
) -> None:
    url = with_password(empty_database_url)
    assert await public_relations(url) == set()

    first = await run_command("migrate", "--database-url", url)

    assert first.returncode == 0, first.describe()
    assert first.stdout.startswith("schema migrated from empty to "), first.describe()
    assert first.stderr == ""
    columns, indexes = await _slot_table_shape(url)
    assert columns == CONTRACT_COLUMNS
    assert "ix_availability_slots_status_start" in indexes
    migrated = await public_relations(url)

    second = await run_command("migrate", "--database-url", url)

    assert second.returncode == 0, second.describe()
    assert second.stdout.strip().endswith("nothing to do"), second.describe()
    assert second.stderr == ""
    assert await public_relations(url) == migrated
    assert PASSWORD not in first.stdout + second.stdout


async def test_migrate_adopts_the_calendars_table_and_says_what_it_kept_and_left_out(
    empty_database_url: str,
) -> None:
    url = with_password(empty_database_url)
    create_calendar_table(empty_database_url, 500, IndexShape.CALENDARS)
    before = calendar_snapshot(empty_database_url)

    done = await run_command("migrate", "--database-url", url)

    assert done.returncode == 0, done.describe()
    assert done.stderr == ""
    first, *notes = done.stdout.splitlines()
    assert first == (
        f"schema migrated from empty to {head_revision()}, adopting the calendar's "
        "availability_slots (its data, columns, constraints, triggers, grants and other "
        "indexes untouched)"
    )
    assert notes[0].startswith("slot_expiration_failures has no foreign key")
    assert notes[1].startswith("not built on the calendar's table: the slot context's indexes")
    assert notes[2].startswith("kept the calendar's ix_availability_slots_status_start: CREATE")
    assert notes[3].startswith("not applied to the calendar's table")
    assert calendar_snapshot(empty_database_url) == before
    assert PASSWORD not in done.stdout


async def test_migrate_refuses_a_misfit_table_in_one_line_exit_1_and_changes_nothing(
    empty_database_url: str,
) -> None:
    create_calendar_table(empty_database_url, 500)
    async with SlotDatabase.open(empty_database_url) as db:
        await db.execute("ALTER TABLE availability_slots RENAME COLUMN status TO state")
        await db.execute("ALTER TABLE availability_slots ALTER COLUMN version TYPE numeric")
    before = calendar_snapshot(empty_database_url)

    done = await run_command("migrate", "--database-url", with_password(empty_database_url))

    assert done.returncode == 1, done.describe()
    assert done.stdout == ""
    assert done.stderr == (
        "slot-expiration: error: the existing availability_slots cannot be adopted, nothing "
        "changed: column status is missing; column version is numeric, not an integer type "
        "(smallint, integer or bigint)\n"
    )
    assert calendar_snapshot(empty_database_url) == before
    assert worker_relations(empty_database_url) == set()


async def test_migrate_on_a_schema_ahead_of_this_release_does_nothing_and_says_so(
    db: SlotDatabase, secret_url: str
) -> None:
    await db.execute("UPDATE slot_expiration_alembic_version SET version_num = '0099'")
    migrated = await public_relations(secret_url)

    done = await run_command("migrate", "--database-url", secret_url)

    assert done.returncode == 0, done.describe()
    assert done.stdout == (
        f"the database is ahead of this release (0099 > {head_revision()}): nothing to do\n"
    )
    assert done.stderr == ""
    assert await public_relations(secret_url) == migrated
    assert await _revision(db) == "0099"


async def test_migrate_on_a_revision_not_of_this_product_is_one_line_exit_1(
    db: SlotDatabase, secret_url: str
) -> None:
    await db.execute("UPDATE slot_expiration_alembic_version SET version_num = 'ae1027a6acf'")

    done = await run_command("migrate", "--database-url", secret_url)

    assert done.returncode == 1, done.describe()
    assert done.stderr == (
        "slot-expiration: error: the schema is at revision 'ae1027a6acf', which is not a "
        "revision of slot-expiration: nothing changed\n"
    )
    assert await _revision(db) == "ae1027a6acf"


async def test_migrate_sql_prints_the_whole_script_without_a_database() -> None:
    done = await run_command("migrate", "--sql")

    assert done.returncode == 0, done.describe()
    assert done.stderr == ""
    script = done.stdout
    assert script.startswith("-- slot-expiration migrations from empty to ")
    assert "SET lock_timeout = 2000;" in script
    assert "CREATE TABLE availability_slots (" in script
    assert "CREATE INDEX CONCURRENTLY ix_availability_slots_status_start_new" in script
    assert "autovacuum_vacuum_scale_factor = 0.02" in script
    assert f"'{head_revision()}'" in script


async def test_migrate_sql_from_a_revision_prints_only_what_follows_it() -> None:
    done = await run_command("migrate", "--sql", "--from", "0003", "--lock-timeout-seconds", "5")

    assert done.returncode == 0, done.describe()
    steps = [line for line in done.stdout.splitlines() if line.startswith("-- Running upgrade")]
    head = int(str(head_revision()))
    assert steps == [f"-- Running upgrade {n:04d} -> {n + 1:04d}" for n in range(3, head)]
    assert "SET lock_timeout = 5000;" in done.stdout


async def test_migrate_sql_changes_nothing_in_the_database_it_is_given(
    empty_database_url: str,
) -> None:
    url = with_password(empty_database_url)

    done = await run_command("migrate", "--sql", "--database-url", url)

    assert done.returncode == 0, done.describe()
    assert await public_relations(url) == set()


async def test_migrate_sql_reads_no_database_url_so_a_bad_one_never_breaks_it() -> None:
    # It reads --schema (the script sets the search_path), never the URL.
    unread = {"SLOT_EXPIRATION_DATABASE_URL": "mysql://u:pw@nowhere/db"}

    done = await run_command("migrate", "--sql", env=unread)

    assert done.returncode == 0, done.describe()
    assert done.stdout.startswith("-- slot-expiration migrations from empty to ")
    assert done.stderr == ""


async def test_the_printed_script_run_by_psql_builds_what_migrate_builds(
    empty_database_url: str, database_url: str
) -> None:
    printed = await run_command("migrate", "--sql")

    ran = run_psql(empty_database_url, printed.stdout)

    assert ran.returncode == 0, ran.stderr
    assert schema_shape(empty_database_url) == schema_shape(database_url)


async def test_the_printed_adoption_script_adopts_the_calendars_table(
    empty_database_url: str,
) -> None:
    create_calendar_table(empty_database_url, 500, IndexShape.NONE)
    before = calendar_snapshot(empty_database_url)
    printed = await run_command("migrate", "--sql", "--adopt")

    ran = run_psql(empty_database_url, printed.stdout)

    assert ran.returncode == 0, ran.stderr
    assert calendar_snapshot(empty_database_url).without_index(SELECTION_INDEX) == before
    assert worker_relations(empty_database_url) == {
        "slot_expiration_failures",
        "slot_expiration_alembic_version",
        "slot_expiration_cycles",
        "slot_expiration_pauses",
    }
    again = await run_command("migrate", "--database-url", empty_database_url)
    assert again.stdout == f"schema already at {head_revision()}: nothing to do\n"


async def test_the_printed_adoption_script_stops_at_its_guard_on_a_misfit_table(
    empty_database_url: str,
) -> None:
    create_calendar_table(empty_database_url, 500)
    async with SlotDatabase.open(empty_database_url) as db:
        await db.execute("ALTER TABLE availability_slots ALTER COLUMN end_at DROP NOT NULL")
    before = calendar_snapshot(empty_database_url)
    printed = await run_command("migrate", "--sql", "--adopt")

    ran = run_psql(empty_database_url, printed.stdout)

    assert ran.returncode != 0
    assert (
        "availability_slots cannot be adopted, nothing changed: column end_at is nullable"
        in ran.stderr
    )
    assert calendar_snapshot(empty_database_url) == before
    assert worker_relations(empty_database_url) == set()


@pytest.mark.parametrize("extra", [["--adopt"], ["--from", "0002"]])
async def test_adopt_and_from_without_sql_are_usage_errors(
    empty_database_url: str, extra: list[str]
) -> None:
    done = await run_command("migrate", *extra, "--database-url", empty_database_url)

    assert done.returncode == 2, done.describe()
    assert done.stderr == (
        "slot-expiration: error: --adopt and --from go with --sql; migrate itself looks at "
        "the database\n"
    )
    assert await public_relations(empty_database_url) == set()


async def test_migrate_sql_from_an_unknown_revision_is_one_line_exit_1() -> None:
    done = await run_command("migrate", "--sql", "--from", "0099")

    assert done.returncode == 1, done.describe()
    assert done.stderr == (
        "slot-expiration: error: --from 0099: not a revision of this release "
        f"(0001..{head_revision()})\n"
    )


def run_psql(url: str, script: str) -> subprocess.CompletedProcess[str]:
    """The script as a DBA would run it: psql, stopping at the first error."""
    psql = find_bindir() / "psql"
    return subprocess.run(
        [str(psql), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url],
        input=script,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def _revision(db: SlotDatabase) -> str:
    cursor = await db.conn.execute("SELECT version_num FROM slot_expiration_alembic_version")
    row = await cursor.fetchone()
    assert row is not None
    return str(row[0])


def _calendar_in_schema(url: str, schema: str) -> str:
    """The calendar's table with its rows in `schema`, which the URL's search_path misses;
    the URL pointed at it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    pointed = with_search_path(url, schema)
    create_calendar_table(pointed, 500, IndexShape.NONE)
    return pointed


async def test_the_printed_empty_database_script_stops_where_the_calendar_is_in_another_schema(
    empty_database_url: str,
) -> None:
    pointed = _calendar_in_schema(empty_database_url, "calendar")
    before = calendar_snapshot(pointed)
    printed = await run_command("migrate", "--sql")

    ran = run_psql(empty_database_url, printed.stdout)
    # migrate itself, on the same database and search_path: the same refusal
    online = await run_command("migrate", "--database-url", empty_database_url)

    assert ran.returncode != 0
    refusal = (
        'availability_slots is not on the search_path ("$user", public) but in schema calendar: '
        "point every command at it with --schema calendar (SLOT_EXPIRATION_SCHEMA)"
    )
    assert refusal in ran.stderr
    assert "nothing changed" in ran.stderr
    assert online.stderr.startswith(f"slot-expiration: error: {refusal}"), online.describe()
    assert await public_relations(empty_database_url) == set()  # no second table, no other
    assert calendar_snapshot(pointed) == before


async def test_the_printed_empty_database_script_stops_on_a_database_holding_the_calendar(
    empty_database_url: str,
) -> None:
    create_calendar_table(empty_database_url, 100)
    printed = await run_command("migrate", "--sql")

    ran = run_psql(empty_database_url, printed.stdout)

    assert ran.returncode != 0
    assert (
        "availability_slots exists already (availability_slots): this script is for an empty "
        "database; print the adoption script with --adopt; nothing changed"
    ) in ran.stderr
    assert worker_relations(empty_database_url) == set()


async def test_the_printed_adoption_script_names_the_schema_the_search_path_misses(
    empty_database_url: str,
) -> None:
    pointed = _calendar_in_schema(empty_database_url, "calendar")
    printed = await run_command("migrate", "--sql", "--adopt")

    ran = run_psql(empty_database_url, printed.stdout)

    assert ran.returncode != 0
    assert (
        'availability_slots is not on the search_path ("$user", public) but in schema '
        "calendar: point every command at it with --schema calendar"
    ) in ran.stderr
    assert worker_relations(pointed) == set()


async def test_the_printed_scripts_honour_the_schema_option(empty_database_url: str) -> None:
    pointed = _calendar_in_schema(empty_database_url, "calendar")
    before = calendar_snapshot(pointed)
    printed = await run_command("migrate", "--sql", "--adopt", "--schema", "calendar")

    ran = run_psql(empty_database_url, printed.stdout)  # the URL's search_path misses it

    assert ran.returncode == 0, ran.stderr
    assert calendar_snapshot(pointed).without_index(SELECTION_INDEX) == before
    assert await public_relations(empty_database_url) == set()
    again = await run_command("migrate", "--database-url", pointed)
    assert again.stdout == f"schema already at {head_revision()}: nothing to do\n"
