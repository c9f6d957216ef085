"""Nothing assumed, end to end on the installed command: behind pgbouncer dropping the URL's
`options`, --schema still names the calendar's table (never a decoy beside it); a
transaction pooler is refused by migrate alone; a role's TimeZone and a column retyped after
adoption never expire a bookable slot; a cycle whose every pick was rejected, and a history
row out of range, are judged by `status --check` at once."""

from __future__ import annotations

import signal
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

from slot_expiration.options.database_url import with_search_path
from slot_expiration.schema.version import HEAD_REVISION
from tests.e2e.command import run_command, started
from tests.e2e.endpoint import endpoint_url, get_json
from tests.support.calendar import create_calendar_table
from tests.support.database import SlotDatabase
from tests.support.servers import Bouncer, pgbouncer
from tests.support.slots import make_slot, past_slots

pytestmark = pytest.mark.e2e

ROWS = 400  # each table's; a tenth of them still to come, every 20th past one due
SCHEMA = "calendar"


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


def _calendar_and_decoy(url: str) -> None:
    """The calendar's table in schema `calendar`, and a decoy of the same shape and rows in
    public, the first schema of the role's search_path."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(SCHEMA)))
    create_calendar_table(with_search_path(url, SCHEMA), ROWS)
    create_calendar_table(url, ROWS)


def _available(url: str, schema: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {}.availability_slots WHERE status = 'Available'").format(
                sql.Identifier(schema)
            )
        ).fetchone()
    assert row is not None
    return int(row[0])


def _may_update_status(url: str) -> tuple[bool, bool]:
    """Whether calendar_worker may update the status of the calendar's table, the decoy's."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT has_column_privilege('calendar_worker', 'calendar.availability_slots', "
            "'status', 'UPDATE'), has_column_privilege('calendar_worker', "
            "'public.availability_slots', 'status', 'UPDATE')"
        ).fetchone()
    assert row is not None
    return bool(row[0]), bool(row[1])


def _worker_tables(url: str) -> set[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT n.nspname::text, c.relname::text FROM pg_class AS c JOIN pg_namespace AS n "
            "ON n.oid = c.relnamespace WHERE c.relname LIKE 'slot\\_expiration\\_%' "
            "AND c.relkind = 'r'"
        ).fetchall()
    return {(str(schema), str(name)) for schema, name in rows}


async def test_behind_a_pooler_dropping_options_schema_names_the_calendar_never_the_decoy(
    empty_database_url: str,
) -> None:
    _calendar_and_decoy(empty_database_url)
    decoy_before = _available(empty_database_url, "public")
    due_before = _available(empty_database_url, SCHEMA)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute("CREATE ROLE calendar_worker NOLOGIN")
    try:
        with pgbouncer(
            _port(empty_database_url), pool_mode="session", drops_options=True
        ) as bouncer:
            url = bouncer.url_for(empty_database_url)
            pointed = ("--database-url", url, "--schema", SCHEMA)
            migrated = await run_command("migrate", *pointed)
            granted = await run_command("grant", "--role", "calendar_worker", *pointed)
            once = await run_command("once", "--json", *pointed)
            check = await run_command("status", "--check", *pointed)
        grants = _may_update_status(empty_database_url)
    finally:
        with psycopg.connect(empty_database_url, autocommit=True) as conn:
            conn.execute("DROP OWNED BY calendar_worker")
            conn.execute("DROP ROLE calendar_worker")

    assert migrated.returncode == 0, migrated.describe()
    assert "adopting the calendar's availability_slots" in migrated.stdout
    assert granted.returncode == 0, granted.describe()
    assert grants == (True, False)  # on the calendar's table, not the decoy
    assert once.returncode == 0, once.describe()
    assert check.returncode == 0, check.describe()
    assert _available(empty_database_url, "public") == decoy_before  # the decoy untouched
    expired = due_before - _available(empty_database_url, SCHEMA)
    assert expired > 0
    assert f'"expired_count": {expired}' in once.stdout
    assert {schema for schema, _ in _worker_tables(empty_database_url)} == {SCHEMA}


async def test_behind_a_transaction_pooler_migrate_refuses_and_the_worker_and_status_work(
    empty_database_url: str,
) -> None:
    _calendar_and_decoy(empty_database_url)
    direct = with_search_path(empty_database_url, SCHEMA)
    assert (await run_command("migrate", "--database-url", direct)).returncode == 0
    decoy_before = _available(empty_database_url, "public")
    with pgbouncer(_port(empty_database_url), drops_options=True) as bouncer:
        pointed = ("--database-url", bouncer.url_for(empty_database_url), "--schema", SCHEMA)
        refused = await run_command("migrate", *pointed)
        once = await run_command("once", *pointed)
        check = await run_command("status", "--check", *pointed)
        leftover = _pooled_settings(bouncer, empty_database_url)

    assert refused.returncode == 1, refused.describe()
    assert refused.stderr.startswith(
        "slot-expiration: error: migrate needs a server session of its own for its whole run"
    )
    assert "pooler in transaction mode" in refused.stderr
    assert once.returncode == 0, once.describe()
    assert check.returncode == 0, check.describe()
    assert _available(empty_database_url, SCHEMA) < ROWS // 10 + 1  # only the future left
    assert _available(empty_database_url, "public") == decoy_before
    assert leftover == {"slot_expiration.migrate_session": "", "lock_timeout": "0"}


def _pooled_settings(bouncer: Bouncer, url: str) -> dict[str, str]:
    """What a later client of the pool finds on its server session: nothing migrate set."""
    with psycopg.connect(bouncer.url_for(url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_setting('slot_expiration.migrate_session', true), "
            "current_setting('lock_timeout')"
        ).fetchone()
    assert row is not None
    return {"slot_expiration.migrate_session": row[0] or "", "lock_timeout": row[1]}


async def test_a_worker_without_schema_beside_a_decoy_says_where_its_calendar_is(
    empty_database_url: str,
) -> None:
    _calendar_and_decoy(empty_database_url)
    direct = with_search_path(empty_database_url, SCHEMA)
    assert (await run_command("migrate", "--database-url", direct)).returncode == 0

    once = await run_command("once", "--database-url", empty_database_url)
    migrate = await run_command("migrate", "--database-url", empty_database_url)

    for done in (once, migrate):
        assert done.returncode == 1, done.describe()
        assert (
            'the search_path ("$user", public) finds public.availability_slots, which '
            "migrate never adopted: the worker's tables are in schema calendar, beside the "
            "calendar it adopted: point every command at it with --schema calendar"
        ) in done.stderr, done.describe()
    assert "to adopt public.availability_slots as a calendar of its own" in migrate.stderr
    assert _available(empty_database_url, "public") == ROWS // 10 + ROWS * 9 // 10 // 20
    assert {schema for schema, _ in _worker_tables(empty_database_url)} == {SCHEMA}


async def test_a_start_at_retyped_under_a_tokyo_role_fails_every_command_saying_so(
    db: SlotDatabase,
) -> None:
    # Slots to come within nine hours: Tokyo's wall-clock times in a `timestamp` column
    # would read as past ones in UTC.
    now = datetime.now(UTC)
    await db.insert([make_slot(timedelta(minutes=10 * k), as_of=now) for k in range(1, 61)])
    name = (await (await db.conn.execute("SELECT current_database()")).fetchone() or [""])[0]
    await db.execute(
        sql.SQL("ALTER DATABASE {} SET TimeZone = 'Asia/Tokyo'").format(sql.Identifier(name))
    )
    column = "column start_at is timestamp without time zone, not timestamp with time zone"

    async with started("run", "--interval-seconds", "1", "--database-url", db.url) as worker:
        url = await endpoint_url(worker)
        await worker.until(lambda: worker.logged("cycle.completed"), "a first cycle")
        # Retyped while the worker runs: its next cycles must see it.
        await db.execute(
            "ALTER TABLE availability_slots ALTER COLUMN start_at TYPE timestamp "
            "USING start_at AT TIME ZONE 'Asia/Tokyo'"
        )
        await worker.until(lambda: worker.logged("cycle.failed"), "a misconfigured cycle")
        ready, readiness = await get_json(f"{url}/readyz")
        worker.send_signal(signal.SIGTERM)
        await worker.wait()
    once = await run_command("once", "--database-url", db.url)
    status = await run_command("status", "--database-url", db.url)
    check = await run_command("status", "--check", "--database-url", db.url)

    assert (ready, readiness["ready"]) == (503, False)
    assert column in readiness["detail"]
    assert once.returncode == 1, once.describe()
    assert column in once.stderr
    assert status.returncode == 0, status.describe()
    assert "Traceback" not in status.stderr
    assert column in status.stdout
    assert check.returncode == 2, check.describe()
    assert column in check.stdout
    left = await (
        await db.conn.execute("SELECT count(*) FROM availability_slots WHERE status = 'Available'")
    ).fetchone()
    assert left == (60,)


async def test_a_cycle_whose_every_pick_was_rejected_is_a_warning_at_once(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(12))
    await db.install_poison_trigger([s.id for s in slots], "P0001")

    once = await run_command("once", "--database-url", db.url)
    check = await run_command("status", "--check", "--database-url", db.url)

    assert once.returncode == 0, once.describe()  # the cycle itself ran as it should
    assert check.returncode == 1, check.describe()
    assert check.stdout.startswith("WARNING: the last cycle of ")
    assert (
        "expired nothing: the database rejected every slot it picked (12 slots, "
        "quarantined: `slot-expiration quarantine list`)"
    ) in check.stdout


async def test_a_history_row_no_date_time_can_hold_never_hides_the_verdict(
    db: SlotDatabase,
) -> None:
    # What a release before --as-of was bounded wrote for `--as-of 0001-01-01T00:00:00+14:00`.
    await db.execute(
        "INSERT INTO slot_expiration_cycles (run_id, instance, as_of, started_at, ended_at, "
        "outcome, stop_reason, expired_count, skipped_locked_count, failed_count, batches, "
        "duration_ms) VALUES (gen_random_uuid(), 'old:1', "
        "'0001-01-01 00:00:00+14'::timestamptz, now(), now(), 'success', 'drained', "
        "0, 0, 0, 1, 1.0)"
    )
    await db.insert(past_slots(3))
    assert (await run_command("once", "--database-url", db.url)).returncode == 0

    check = await run_command("status", "--check", "--database-url", db.url)
    status = await run_command("status", "--json", "--database-url", db.url)

    assert check.returncode == 0, check.describe()
    assert check.stdout.startswith("OK: last success ")
    assert status.returncode == 0, status.describe()
    assert HEAD_REVISION in status.stdout
