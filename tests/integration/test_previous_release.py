"""Migrations only add: the statements of the latest release still resolve on a schema
at head, fresh or adopted. An older replica runs them while a newer release migrates
(rolling deploys) or after a rollback."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from slot_expiration.schema.migrate import upgrade
from tests.compat.statements import (
    released_statements,
    released_version,
    unresolved,
    unwritten_columns,
)
from tests.support.calendar import create_calendar_table

pytestmark = pytest.mark.integration

REPOSITORY = Path(__file__).resolve().parents[2]


def test_the_frozen_statements_are_those_of_the_latest_release() -> None:
    changelog = (REPOSITORY / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[([^\]]+)\]", changelog, flags=re.MULTILINE)
    latest = next(release for release in releases if release != "Unreleased")

    # A new release is named: freeze its statements (tests/compat/README.md).
    assert released_version() == latest


def test_the_latest_release_statements_are_many_not_a_vacuous_few() -> None:
    statements = released_statements()

    assert len(statements) >= 30
    assert {"expire_batch", "lock_batch", "cycle_preflight", "quarantine_rows"} <= set(statements)


def test_the_latest_release_statements_resolve_on_a_schema_at_head(
    empty_database_url: str,
) -> None:
    upgrade(empty_database_url)

    assert unresolved(empty_database_url, released_statements()) == {}
    assert unwritten_columns(empty_database_url, released_statements()) == {}


def test_the_latest_release_statements_resolve_on_an_adopted_schema_at_head(
    empty_database_url: str,
) -> None:
    create_calendar_table(empty_database_url, 100)
    upgrade(empty_database_url)

    assert unresolved(empty_database_url, released_statements()) == {}
    assert unwritten_columns(empty_database_url, released_statements()) == {}


def test_a_migration_adding_a_column_the_release_cannot_write_is_caught(
    empty_database_url: str,
) -> None:
    upgrade(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        # As a careless later migration would: NOT NULL and no default.
        conn.execute("ALTER TABLE slot_expiration_failures ADD COLUMN cycle_id uuid")
        conn.execute("ALTER TABLE slot_expiration_failures ALTER COLUMN cycle_id SET NOT NULL")

    found = unwritten_columns(empty_database_url, released_statements())

    assert found == {"quarantine_rows": "slot_expiration_failures requires cycle_id"}


@pytest.mark.parametrize(
    ("bad_migration", "broken", "error"),
    [
        (
            "ALTER TABLE slot_expiration_failures RENAME COLUMN next_attempt_at TO due_at",
            "quarantine_rows",
            'undefined column: ERROR:  column "next_attempt_at" of relation '
            '"slot_expiration_failures" does not exist',
        ),
        (
            "ALTER TABLE slot_expiration_failures RENAME TO slot_expiration_quarantine",
            "release_rows",
            'undefined table: ERROR:  relation "slot_expiration_failures" does not exist',
        ),
        (
            "ALTER TABLE availability_slots DROP COLUMN consultant_id CASCADE",
            "insert_slot",
            'undefined column: ERROR:  column "consultant_id" of relation '
            '"availability_slots" does not exist',
        ),
    ],
)
def test_a_migration_dropping_or_renaming_what_the_release_uses_is_caught(
    empty_database_url: str, bad_migration: str, broken: str, error: str
) -> None:
    upgrade(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute(bad_migration)  # as a careless later migration would

    found = unresolved(empty_database_url, released_statements())

    assert found[broken] == error
