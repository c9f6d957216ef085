"""`slot-expiration migrate` against a real, empty database."""

from __future__ import annotations

import psycopg
import pytest

from tests.e2e.command import PASSWORD, public_relations, run_command, with_password

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
