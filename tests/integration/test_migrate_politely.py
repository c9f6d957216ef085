"""`migrate` never queues the calendar's writes: each statement waits for a lock one short
try (100 ms) and the step is tried again later, until the lock timeout; a step that gives
up leaves the schema resumable and says so. It adopts only the table meant, and says who
may run it when it cannot read the calendar's table."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import sql

from slot_expiration.db.errors import ContractMismatchError, WrongSlotTableError
from slot_expiration.db.session import ApplicationName
from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.schema.migrate import (
    LOCK_TRY_MS,
    LockWaitError,
    MigrationOutcome,
    head_revision,
    upgrade,
)
from tests.support.calendar import create_calendar_table, worker_relations
from tests.support.partitions import Months, create_monthly_calendar, partition_indexes
from tests.support.roles import password_role

pytestmark = pytest.mark.integration

DEADLINE_SECONDS = 60.0  # only turns a hang into a failure
AS_OF = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
LAST = datetime(2027, 1, 31, tzinfo=UTC)
MONTHS = Months(first=datetime(2026, 7, 1, tzinfo=UTC), premake=2)
# A calendar write's own patience: ten times one try of migrate's. Behind a migrate that
# waited on its lock for the worker's 2 s (as before), a write gives up.
WRITE_LOCK_TIMEOUT = "1s"


@dataclass
class Migrating:
    """upgrade() in a thread: `retrying` is set once a step gave up on a lock."""

    thread: threading.Thread = field(default_factory=threading.Thread)
    retrying: threading.Event = field(default_factory=threading.Event)
    results: list[object] = field(default_factory=list)

    def finish(self) -> object:
        self.thread.join(DEADLINE_SECONDS)
        assert not self.thread.is_alive(), "upgrade still running"
        (result,) = self.results
        return result


def _migrating(url: str, lock_timeout_ms: int) -> Migrating:
    migrating = Migrating()

    def migrate() -> None:
        try:
            outcome = upgrade(
                url, lock_timeout_ms=lock_timeout_ms, on_lock_wait=migrating.retrying.set
            )
            migrating.results.append(outcome)
        except Exception as exc:  # noqa: BLE001 - handed to the test thread to assert on
            migrating.results.append(exc)

    migrating.thread = threading.Thread(target=migrate, daemon=True)
    migrating.thread.start()
    return migrating


@contextmanager
def write_transaction_open(url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A calendar transaction that wrote a slot and stays open (a long one, or one a
    client forgot): it holds its lock on the table until the block ends."""
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE availability_slots SET version = version + 1 WHERE legacy_id = 1")
        yield conn
        conn.rollback()


def _wait_until_migrate_waits_on_a_lock(url: str) -> None:
    """Until a session of migrate is queued for a lock (its request not granted)."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FROM pg_locks AS l JOIN pg_stat_activity AS a USING (pid) "
                "WHERE NOT l.granted AND a.application_name = %s",
                [ApplicationName.MIGRATE],
            ).fetchone()
            if row is not None and row[0] > 0:
                return
            assert time.monotonic() < deadline, "migrate never waited on a lock"
            time.sleep(0.005)  # another session's lock queue has no event to wait on


def test_a_long_write_transaction_never_makes_the_calendars_writes_queue_behind_migrate(
    empty_database_url: str,
) -> None:
    create_monthly_calendar(empty_database_url, 3_000, MONTHS, AS_OF, LAST)
    writes = 0
    with write_transaction_open(empty_database_url):
        migrating = _migrating(empty_database_url, lock_timeout_ms=120_000)
        with psycopg.connect(empty_database_url, autocommit=True) as writer:
            writer.execute(f"SET lock_timeout = '{WRITE_LOCK_TIMEOUT}'")
            for legacy_id in range(2, 12):
                # Each write arrives while migrate's request for the parent's lock is
                # queued ahead of it: it waits for that try to end, never longer.
                _wait_until_migrate_waits_on_a_lock(empty_database_url)
                writer.execute(
                    "UPDATE availability_slots SET version = version + 1 WHERE legacy_id = %s",
                    [legacy_id],
                )
                writes += 1
        assert migrating.retrying.is_set()
    outcome = migrating.finish()

    assert writes == 10  # none gave up: each waited less than its 1 s lock_timeout
    assert isinstance(outcome, MigrationOutcome), outcome
    # Said of the database as this migrate found it, whichever try finished the work.
    assert (outcome.before, outcome.after, outcome.adopted) == (None, head_revision(), True)
    indexes = partition_indexes(empty_database_url)
    assert indexes.valid is True
    assert indexes.every_partition_indexed


def test_a_lock_held_past_the_lock_timeout_stops_migrate_resumable_saying_where_it_left(
    empty_database_url: str,
) -> None:
    create_monthly_calendar(empty_database_url, 300, MONTHS, AS_OF, LAST)
    with write_transaction_open(empty_database_url), pytest.raises(LockWaitError) as stopped:
        upgrade(empty_database_url, lock_timeout_ms=1_000)

    message = str(stopped.value)
    assert message.startswith(f"gave up after 1 s of tries of {LOCK_TRY_MS} ms each")
    assert "lock timeout" in message  # the server's own words for the last try
    assert "the schema is at 0003, and migrate resumes from there" in message
    resumed = upgrade(empty_database_url)
    assert (resumed.before, resumed.after) == ("0003", head_revision())
    assert partition_indexes(empty_database_url).every_partition_indexed


def test_migrate_refuses_to_adopt_a_second_table_beside_the_calendar_it_adopted(
    empty_database_url: str,
) -> None:
    calendar = _with_search_path(empty_database_url, "calendar")
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA calendar")
    create_calendar_table(calendar, 100)
    upgrade(calendar)
    create_calendar_table(empty_database_url, 100)  # public.availability_slots, a decoy

    with pytest.raises(WrongSlotTableError) as refused:
        upgrade(empty_database_url)

    assert str(refused.value) == (
        'the search_path ("$user", public) finds public.availability_slots, which '
        "migrate never adopted: the worker's tables are in schema calendar, beside the "
        "calendar it adopted: point every command at it with --schema calendar "
        "(SLOT_EXPIRATION_SCHEMA), or the URL's options=-csearch_path%3Dcalendar, or ALTER "
        "ROLE postgres SET search_path = calendar; to adopt public.availability_slots as a "
        "calendar of its own, run migrate with --schema public; nothing changed"
    )
    assert _worker_tables_in(empty_database_url, "public") == set()
    adopted = upgrade(_with_search_path(empty_database_url, "public"))  # asked for: done
    assert adopted.adopted


def test_migrate_as_a_role_that_may_not_read_the_table_names_its_owner(
    empty_database_url: str, pg_server: EmbeddedPostgres
) -> None:
    create_calendar_table(empty_database_url, 100)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute("REVOKE SELECT ON availability_slots FROM PUBLIC")
        owner = conn.execute(
            "SELECT pg_get_userbyid(relowner) FROM pg_class "
            "WHERE oid = 'availability_slots'::regclass"
        ).fetchone()
    with password_role(pg_server) as role:
        with psycopg.connect(empty_database_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(sql.Identifier(role.name))
            )
        with pytest.raises(ContractMismatchError) as refused:
            upgrade(role.url_for(empty_database_url))

    assert owner is not None
    assert refused.value.problems == (
        f"migrate runs as {role.name}, which does not act as the owner of availability_slots "
        f"({owner[0]}): run it as that role",
    )
    assert worker_relations(empty_database_url) == set()


def _with_search_path(url: str, schema: str) -> str:
    from slot_expiration.options.database_url import with_search_path  # noqa: PLC0415

    return with_search_path(url, schema)


def _worker_tables_in(url: str, schema: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT c.relname::text FROM pg_class AS c JOIN pg_namespace AS n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname LIKE %s",
            [schema, "slot\\_expiration\\_%"],
        ).fetchall()
    return {str(row[0]) for row in rows}
