"""Several `migrate` at once (migration Jobs started together, a retried Job beside the
first): every one exits 0 and the schema ends at head; one migrates, the others
wait their turn, then find nothing to do. Never a deadlock, never a half-migrated
schema."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from enum import StrEnum
from functools import partial

import psycopg
import pytest

from slot_expiration.schema.migrate import downgrade, head_revision, migration_lock, upgrade
from tests.e2e.command import Finished, run_command, started
from tests.support.calendar import IndexShape, create_calendar_table

pytestmark = pytest.mark.e2e

AT_ONCE = 4
ROUNDS = 3
# Four processes on a shared machine, each loading Alembic: generous, a hang's guard.
TIMEOUT_SECONDS = 120.0
WAITING = "another migrate is running on this database: waiting for it to finish"
WORKER_INDEX = "USING btree (start_at, id) WHERE (status = 'Available'::text)"


class Start(StrEnum):
    EMPTY = "an empty database"
    OLDER = "a database at revision 0003"
    CALENDAR = "the calendar's table, without the worker's index"


def _arrange(url: str, start: Start) -> None:
    if start is Start.OLDER:
        upgrade(url)
        downgrade(url, "0003")
    elif start is Start.CALENDAR:
        create_calendar_table(url, 20_000, IndexShape.NONE)


@pytest.mark.parametrize("round_", range(1, ROUNDS + 1))
@pytest.mark.parametrize("start", list(Start))
async def test_four_migrate_at_once_all_exit_0_one_migrating_and_the_schema_ends_at_head(
    empty_database_url: str, start: Start, round_: int
) -> None:
    _arrange(empty_database_url, start)

    runs = await asyncio.gather(
        *(
            run_command(
                "migrate", "--database-url", empty_database_url, timeout_seconds=TIMEOUT_SECONDS
            )
            for _ in range(AT_ONCE)
        )
    )

    described = "\n".join(run.describe() for run in runs)
    assert [run.returncode for run in runs] == [0] * AT_ONCE, described
    assert all(run.stderr == "" for run in runs), described
    migrated = [run for run in runs if "schema migrated from" in run.stdout]
    assert len(migrated) == 1, described
    others = [run for run in runs if run not in migrated]
    assert all(
        _last_line(run) == f"schema already at {head_revision()}: nothing to do" for run in others
    ), described
    assert _schema(empty_database_url) == (head_revision(), [], WORKER_INDEX)


def _last_line(run: Finished) -> str:
    return run.stdout.splitlines()[-1]


def _schema(url: str) -> tuple[str, list[str], str]:
    """The revision, any invalid or half-built index, and the selection index's shape."""
    with psycopg.connect(url) as conn:
        revision = conn.execute(
            "SELECT version_num FROM slot_expiration_alembic_version"
        ).fetchone()
        broken = conn.execute(
            "SELECT c.relname::text FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid "
            "WHERE NOT (i.indisvalid AND i.indisready) OR c.relname LIKE '%\\_new'"
        ).fetchall()
        index = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_availability_slots_status_start'"
        ).fetchone()
    assert revision is not None
    assert index is not None
    shape = WORKER_INDEX if str(index[0]).endswith(WORKER_INDEX) else str(index[0])
    return str(revision[0]), [str(row[0]) for row in broken], shape


@pytest.mark.parametrize("start", list(Start))
async def test_four_migrate_waiting_on_a_held_lock_all_go_through_once_it_is_released(
    empty_database_url: str, start: Start
) -> None:
    _arrange(empty_database_url, start)
    args = ("migrate", "--database-url", empty_database_url)

    async with AsyncExitStack() as stack:
        with migration_lock(empty_database_url):  # as a migrate already running holds it
            runs = [await stack.enter_async_context(started(*args)) for _ in range(AT_ONCE)]
            for run in runs:
                await run.until(partial(run.printed, WAITING), "waiting for the lock")
        finished = [await run.wait(TIMEOUT_SECONDS) for run in runs]

    described = "\n".join(run.describe() for run in finished)
    assert [run.returncode for run in finished] == [0] * AT_ONCE, described
    assert all(run.stdout.startswith(WAITING) for run in finished), described
    assert sum("schema migrated from" in run.stdout for run in finished) == 1, described
    assert _schema(empty_database_url) == (head_revision(), [], WORKER_INDEX)
