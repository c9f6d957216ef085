"""The migration lock: one migrate at a time, and a migrate waiting for it never holds
up the one migrating (whose CREATE INDEX CONCURRENTLY waits for older snapshots)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import psycopg
import pytest

from slot_expiration.schema.migrate import MigrationOutcome, head_revision, migration_lock, upgrade

pytestmark = pytest.mark.integration

# Deadlines that only turn a hang into a failure.
DEADLINE_SECONDS = 60.0
BUILD = "CREATE INDEX CONCURRENTLY probe_ix ON probe (n)"


def _probe_table(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE probe AS SELECT generate_series(1, 1000) AS n")


@dataclass
class Background:
    """upgrade() in a thread: `waiting` is set once it waits for the lock."""

    thread: threading.Thread
    waiting: threading.Event = field(default_factory=threading.Event)
    results: list[object] = field(default_factory=list)

    def finish(self) -> object:
        self.thread.join(DEADLINE_SECONDS)
        assert not self.thread.is_alive(), "upgrade still running"
        (result,) = self.results
        return result


def _upgrade_in_the_background(url: str) -> Background:
    background = Background(threading.Thread(daemon=True))

    def migrate() -> None:
        try:
            background.results.append(upgrade(url, on_wait=background.waiting.set))
        except Exception as exc:  # noqa: BLE001 - handed to the test thread to assert on
            background.results.append(exc)

    background.thread = threading.Thread(target=migrate, daemon=True)
    background.thread.start()
    return background


def test_a_migrate_waits_while_another_holds_the_lock_then_finds_its_own_work(
    empty_database_url: str,
) -> None:
    with migration_lock(empty_database_url):  # taken first, as a migrate running would hold it
        background = _upgrade_in_the_background(empty_database_url)
        assert background.waiting.wait(DEADLINE_SECONDS)
        assert background.results == []  # nothing ran while the lock was held

    outcome = background.finish()
    assert isinstance(outcome, MigrationOutcome)
    assert (outcome.before, outcome.after, outcome.waited) == (None, head_revision(), True)


def test_a_migrate_waiting_for_the_lock_never_holds_up_a_concurrent_index_build(
    empty_database_url: str,
) -> None:
    _probe_table(empty_database_url)
    with (
        migration_lock(empty_database_url),
        psycopg.connect(empty_database_url, autocommit=True) as migrating,
    ):
        background = _upgrade_in_the_background(empty_database_url)
        assert background.waiting.wait(DEADLINE_SECONDS)
        # What the holder's migration session does meanwhile: a waiter holding a
        # snapshot would make it wait for ever (lock_timeout turns that into an error).
        migrating.execute("SET lock_timeout = '10s'")
        migrating.execute(BUILD)
        valid = migrating.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = 'probe_ix'::regclass"
        ).fetchone()

    assert valid == (True,)
    assert isinstance(background.finish(), MigrationOutcome)


def test_a_session_blocked_in_pg_advisory_lock_would_hold_up_that_build(
    empty_database_url: str,
) -> None:
    """Why waiters poll pg_try_advisory_lock (migrate.sql) instead of blocking: the lock
    is held by one session and the build runs in another, so the server sees no
    deadlock (the build waits for the waiter's snapshot, the waiter for the holder,
    the holder for its own process's build). lock_timeout turns the hang into an error."""
    _probe_table(empty_database_url)
    key = 4711
    with (
        psycopg.connect(empty_database_url, autocommit=True) as holder,
        psycopg.connect(empty_database_url, autocommit=True) as migrating,
        psycopg.connect(empty_database_url, autocommit=True) as waiter,
    ):
        holder.execute("SELECT pg_advisory_lock(%s)", [key])
        blocked = threading.Thread(
            target=lambda: waiter.execute("SELECT pg_advisory_lock(%s)", [key]), daemon=True
        )
        blocked.start()
        _until_waiting_on_an_advisory_lock(holder, waiter.info.backend_pid)
        migrating.execute("SET lock_timeout = '1s'")

        with pytest.raises(psycopg.errors.LockNotAvailable):
            migrating.execute(BUILD)

        holder.execute("SELECT pg_advisory_unlock(%s)", [key])
        blocked.join(DEADLINE_SECONDS)


def _until_waiting_on_an_advisory_lock(
    conn: psycopg.Connection[tuple[object, ...]], pid: int
) -> None:
    for _ in range(int(DEADLINE_SECONDS / 0.02)):
        row = conn.execute(
            "SELECT wait_event FROM pg_stat_activity WHERE pid = %s", [pid]
        ).fetchone()
        if row == ("advisory",):
            return
        threading.Event().wait(0.02)  # another session's state: polled, there is no event
    raise AssertionError("the session never waited on the advisory lock")
