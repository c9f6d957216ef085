"""Where the calendar's table lives: every command uses the availability_slots the session's
search_path finds, and never creates a second one. With the table in a schema the
search_path misses, each command refuses (exit 1, nothing created) naming the schema and
the three ways to point at it; `--schema` / SLOT_EXPIRATION_SCHEMA points every command."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import sql

from slot_expiration.options.database_url import with_search_path
from tests.e2e.command import run_command, with_password
from tests.support.calendar import calendar_snapshot, create_calendar_table

pytestmark = pytest.mark.e2e

ROWS = 500
SCHEMA = "booking"


def _in_schema(url: str, schema: str = SCHEMA) -> str:
    """The calendar's own table, in `schema`, with rows due now."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    pointed = with_search_path(url, schema)
    create_calendar_table(pointed, ROWS, as_of=datetime.now(UTC))
    return pointed


def _tables(url: str) -> set[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT n.nspname::text, c.relname::text FROM pg_class AS c "
            "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p') "
            "AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
    return {(str(schema), str(name)) for schema, name in rows}


def _says_where_it_is(line: str, schema: str = SCHEMA) -> None:
    assert "availability_slots is not on the search_path" in line
    assert f"but in schema {schema}: point every command at it with --schema {schema} " in line
    assert "the URL's options=-csearch_path%3D" in line
    assert "ALTER ROLE postgres SET search_path = " in line


@pytest.mark.parametrize(
    "command",
    [
        ["migrate"],
        ["once"],
        ["run", "--interval-seconds", "1"],
        ["status"],
        ["status", "--check"],
        ["grant", "--role", "pg_monitor"],
        ["quarantine", "list"],
    ],
    ids=" ".join,
)
async def test_a_calendar_table_the_search_path_misses_is_found_and_named_never_duplicated(
    empty_database_url: str, command: list[str]
) -> None:
    _in_schema(empty_database_url)
    before = _tables(empty_database_url)

    done = await run_command(*command, "--database-url", with_password(empty_database_url))

    # status --check could judge nothing: UNKNOWN, 3, the monitoring plugins' convention.
    checking = command == ["status", "--check"]
    assert done.returncode in ((3,) if checking else (1, 2)), done.describe()
    line = (done.stdout if checking else done.stderr).splitlines()[-1]
    _says_where_it_is(line)
    assert _tables(empty_database_url) == before  # nothing created, no second table


async def test_the_schema_option_points_migrate_and_the_worker_at_the_calendars_table(
    empty_database_url: str,
) -> None:
    pointed = _in_schema(empty_database_url)
    calendar = calendar_snapshot(pointed)
    url = with_password(empty_database_url)

    migrated = await run_command("migrate", "--schema", SCHEMA, "--database-url", url)
    pointed_by_variable = {"SLOT_EXPIRATION_SCHEMA": SCHEMA}
    once = await run_command("once", "--json", "--database-url", url, env=pointed_by_variable)
    status = await run_command("status", "--json", "--schema", SCHEMA, "--database-url", url)

    assert migrated.returncode == 0, migrated.describe()
    assert "adopting the calendar's availability_slots" in migrated.stdout
    assert once.returncode == 0, once.describe()
    assert json.loads(once.stdout)["expired_count"] > 0
    assert status.returncode == 0, status.describe()
    assert json.loads(status.stdout)["schema"]["up_to_date"] is True
    tables = _tables(empty_database_url)
    assert {name for schema, name in tables if schema == "public"} == set()
    assert (SCHEMA, "slot_expiration_failures") in tables
    assert calendar_snapshot(pointed).table == calendar.table


async def test_a_schema_name_that_needs_quoting_is_pointed_at_as_it_is(
    empty_database_url: str,
) -> None:
    _in_schema(empty_database_url, "Calendar Data")
    url = with_password(empty_database_url)

    unpointed = await run_command("migrate", "--database-url", url)
    migrated = await run_command("migrate", "--schema", "Calendar Data", "--database-url", url)

    assert unpointed.returncode == 1, unpointed.describe()
    assert 'SET search_path = "Calendar Data"' in unpointed.stderr
    assert "options=-csearch_path%3D%22Calendar%20Data%22" in unpointed.stderr
    assert migrated.returncode == 0, migrated.describe()
    assert ("Calendar Data", "slot_expiration_cycles") in _tables(empty_database_url)
