"""Applies the Alembic migrations shipped inside the package: one migrate at a time,
adopting the calendar's availability_slots where it exists, never on a schema ahead.

Before Alembic starts, `upgrade` takes the migration lock in a session of its own
(several migrate Jobs may start at once: one migrates, the others wait, then
find the schema at head), then reads where the database stands:

- a revision ahead of this release (a newer release migrated first): nothing to
  do, and said so; migrations only add, so this release runs on it;
- no availability_slots on the search_path, but one in another schema: the
  calendar's, never duplicated: refused, saying how to point at it;
- an existing availability_slots never migrated by us: the calendar's table. It
  is adopted only if it fits the table contract and migrate may add the worker's
  objects beside it; otherwise every problem is named and nothing is changed;
- a schema migrated before: what the worker owns and is missing at its revision is
  created again first (a repair: _repair), then the newer migrations run.

`upgrade_sql` prints the SQL instead of running it (Alembic's offline mode), for
a DBA to review; it cannot look at the database (see migration_context).
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import alembic.util
import psycopg
import sqlalchemy.exc
from alembic import command
from alembic.config import Config
from alembic.runtime.environment import EnvironmentContext
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from psycopg import sql
from psycopg.rows import dict_row
from sqlalchemy import Engine, create_engine
from sqlalchemy.pool import NullPool

from slot_expiration.options.settings import DEFAULT_LOCK_TIMEOUT_SECONDS
from slot_expiration.store import migration_context
from slot_expiration.store.errors import (
    ContractMismatchError,
    MigrationError,
    SlotTableElsewhereError,
    StoreError,
    first_line,
    translate,
)
from slot_expiration.store.schema_version import (
    VERSION_TABLE,
    SchemaPosition,
    position_of,
    unknown_revision,
)
from slot_expiration.store.session import ApplicationName, connect_sync, milliseconds
from slot_expiration.store.statements import query

_SCRIPT_LOCATION = "slot_expiration.store:migrations"
# The worker's default --lock-timeout-seconds: no statement of a migration queues
# the calendar's writes behind its lock for longer.
DEFAULT_LOCK_TIMEOUT_MS: Final = milliseconds(DEFAULT_LOCK_TIMEOUT_SECONDS)
# How often a migrate waiting for another tries the lock again (see migrate.sql,
# migrate_try_lock, for why it polls instead of blocking).
LOCK_POLL_SECONDS: Final = 0.25

OnWait = Callable[[], None]


@dataclass(frozen=True, slots=True)
class MigrationOutcome:
    """What `upgrade` found and did. `notes`: what a repair created again, what adoption
    kept or left out."""

    before: str | None
    after: str | None
    adopted: bool = False  # this run adopted the calendar's availability_slots
    ahead: bool = False  # a newer release's schema: nothing was done
    waited: bool = False  # another migrate held the lock first
    notes: tuple[str, ...] = ()
    repaired: bool = False  # what the worker owns was missing or altered, and is again

    @property
    def changed(self) -> bool:
        return self.before != self.after or self.repaired


@dataclass(frozen=True, slots=True)
class _StartingPoint:
    slot_table_exists: bool
    revision: str | None

    @property
    def adopting(self) -> bool:
        """A slot table we never migrated is the calendar's."""
        return self.slot_table_exists and self.revision is None


def _config(
    database_url: str | None,
    lock_timeout_ms: int = DEFAULT_LOCK_TIMEOUT_MS,
    *,
    adopt: bool = False,
    output: io.StringIO | None = None,
) -> Config:
    config = Config(output_buffer=output)
    config.set_main_option("script_location", _SCRIPT_LOCATION)
    # The URL travels in attributes, not in the ini options, so a '%' in a
    # password is never taken for ConfigParser interpolation.
    config.attributes["database_url"] = database_url
    config.attributes[migration_context.LOCK_TIMEOUT_MS] = lock_timeout_ms
    config.attributes[migration_context.ADOPT] = adopt
    return config


def head_revision() -> str | None:
    """The newest revision as Alembic finds it (the worker uses schema_version.HEAD_REVISION)."""
    return ScriptDirectory.from_config(_config(None)).get_current_head()


def engine_for(database_url: str, lock_timeout_ms: int | None = None) -> Engine:
    """A SQLAlchemy engine whose connections psycopg opens from our URL as it is.

    SQLAlchemy's own URL parser knows fewer forms than libpq (multi-host lists,
    an empty port with ?port=); letting psycopg connect accepts every URL the
    worker itself accepts. With `lock_timeout_ms`, each session waits no longer
    for a lock (migrations lift it only to build indexes CONCURRENTLY).
    """

    def connect() -> psycopg.Connection[Any]:
        connection = connect_sync(database_url, ApplicationName.MIGRATE)
        if lock_timeout_ms is not None:
            params = {"lock_timeout": str(lock_timeout_ms)}
            with _translated():
                connection.execute(query("migrate_lock_timeout"), params)
                connection.commit()
        return connection

    # Raised from the creator, our error reaches the caller unwrapped by SQLAlchemy.
    return create_engine("postgresql+psycopg://", creator=connect, poolclass=NullPool)


def current_revision(database_url: str) -> str | None:
    engine = engine_for(database_url)
    try:
        with _translated(), engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
            return context.get_current_revision()
    finally:
        engine.dispose()


def upgrade(
    database_url: str,
    *,
    lock_timeout_ms: int = DEFAULT_LOCK_TIMEOUT_MS,
    on_wait: OnWait | None = None,
    sandbox: bool = False,
) -> MigrationOutcome:
    """Bring the schema to the newest revision; a no-op when it is there or ahead.

    `on_wait` is told once when another migrate holds the lock and this one waits.
    `sandbox`: the search_path's first schema is a scratch calendar of its own (the
    benchmark's), whose availability_slots is created there even though another
    schema holds the calendar's; `migrate` itself never passes it.
    """
    head = _head()
    with _translated(), migration_lock(database_url, on_wait) as (session, waited):
        start = _starting_point(session)
        if not sandbox:
            _require_slot_table_on_the_search_path(session, start)
        position = position_of(start.revision, head)
        if position is SchemaPosition.AHEAD:
            return MigrationOutcome(start.revision, start.revision, ahead=True, waited=waited)
        if position is SchemaPosition.UNKNOWN:
            raise MigrationError(f"{unknown_revision(str(start.revision))}: nothing changed")
        if start.adopting:
            _require_adoptable(session)
        config = _config(database_url, lock_timeout_ms)
        repaired: tuple[str, ...] = ()
        if start.revision is not None:
            repaired = _repair(session, config, start.revision, lock_timeout_ms, position)
        if position is not SchemaPosition.CURRENT:
            command.upgrade(config, "head")
    return MigrationOutcome(
        before=start.revision,
        after=head,
        adopted=start.adopting,
        waited=waited,
        notes=(*repaired, *config.attributes.get(migration_context.NOTES, ())),
        repaired=bool(repaired),
    )


def _repair(
    session: psycopg.Connection[Any],
    config: Config,
    revision: str,
    lock_timeout_ms: int,
    position: SchemaPosition,
) -> tuple[str, ...]:
    """Recreate what the worker owns and is missing at the schema's revision: each
    migration up to it runs again, creating only what is missing (tables, columns,
    indexes, checks). At the newest revision the worker's tables are also held to
    their shape: one that differs otherwise (a column renamed or retyped) is created
    again if it is empty, and refused, naming it and the way out, if it holds rows.
    Returns what was repaired, for the operator."""
    notes = _replay(config, revision)
    if position is not SchemaPosition.CURRENT:
        return notes  # the worker's tables are not at their newest shape yet
    altered = _altered_worker_tables(session)
    if not altered:
        return notes
    if holding := {table: found for table, found in altered.items() if found.rows}:
        raise RepairRefusedError(holding, notes)
    session.execute(query("migrate_lock_timeout"), {"lock_timeout": str(lock_timeout_ms)})
    for table in altered:
        session.execute(sql.SQL(query("drop_worker_table")).format(table=sql.Identifier(table)))
    notes = (*notes, *_replay(config, revision))
    if left := _altered_worker_tables(session):
        raise MigrationError(f"still differs after its repair: {_differences(left)}")
    return notes


def _replay(config: Config, revision: str) -> tuple[str, ...]:
    """Run the migrations up to `revision` again (migrations/env.py), collecting what
    they say they created again."""
    config.attributes[migration_context.REPLAY] = revision
    config.attributes[migration_context.NOTES] = []
    config.attributes[migration_context.RECREATED_TABLES] = set()
    try:
        script = ScriptDirectory.from_config(config)
        with EnvironmentContext(config, script):
            script.run_env()
        return tuple(config.attributes[migration_context.NOTES])
    finally:
        config.attributes[migration_context.REPLAY] = None
        config.attributes[migration_context.NOTES] = []


@dataclass(frozen=True, slots=True)
class AlteredTable:
    """How one of the worker's tables differs from its shape, and the rows it holds."""

    problems: tuple[str, ...]
    rows: int


def _altered_worker_tables(session: psycopg.Connection[Any]) -> dict[str, AlteredTable]:
    found: dict[str, list[str]] = {}
    rows: dict[str, int] = {}
    for row in _rows(session, "worker_shape_mismatches"):
        found.setdefault(row["relation"], []).append(row["problem"])
        rows[row["relation"]] = int(row["rows"])
    return {table: AlteredTable(tuple(problems), rows[table]) for table, problems in found.items()}


def _differences(altered: dict[str, AlteredTable]) -> str:
    return "; ".join(problem for found in altered.values() for problem in found.problems)


class RepairRefusedError(MigrationError):
    """One of the worker's tables differs from its shape and holds rows that recreating
    it would lose: only a person may decide that."""

    def __init__(self, altered: dict[str, AlteredTable], repaired: tuple[str, ...]) -> None:
        tables = ", ".join(f"{table} ({found.rows} rows)" for table, found in altered.items())
        ways = "; or ".join(
            f"empty it (TRUNCATE {table}: {_LOST[table]}) and run migrate again"
            for table in altered
        )
        done = f"; meanwhile {', '.join(repaired)}" if repaired else ""
        super().__init__(
            f"cannot repair {_differences(altered)}: recreating {tables} would lose its rows; "
            f"restore what changed as the migrations made it, or {ways}{done}"
        )


# What emptying each of the worker's tables loses.
_LOST: Final = {
    "slot_expiration_failures": "the quarantined slots are retried at the next cycle",
    "slot_expiration_cycles": "the cycle history shown by status and ui",
    VERSION_TABLE: "the record of the revision: migrate then adopts availability_slots again",
}


def upgrade_sql(
    *,
    adopt: bool = False,
    from_revision: str | None = None,
    lock_timeout_ms: int = DEFAULT_LOCK_TIMEOUT_MS,
) -> str:
    """The SQL `upgrade` would run, from `from_revision` (None: an empty database, or
    with `adopt` one holding only the calendar's table), without a database."""
    head = _head()
    if from_revision is not None and position_of(from_revision, head) not in (
        SchemaPosition.BEHIND,
        SchemaPosition.CURRENT,
    ):
        raise MigrationError(
            f"--from {from_revision}: not a revision of this release (0001..{head})"
        )
    output = io.StringIO()
    config = _config(None, lock_timeout_ms, adopt=adopt, output=output)
    with _translated():
        command.upgrade(config, f"{from_revision}:head" if from_revision else "head", sql=True)
    return _offline_header(adopt, from_revision, head, lock_timeout_ms) + output.getvalue()


def downgrade(database_url: str, revision: str) -> None:
    """Take the schema back to `revision` (a release rolled back). An adopted
    availability_slots stays: it is the calendar's."""
    config = _config(database_url)
    with _translated(), migration_lock(database_url):
        command.downgrade(config, revision)


@contextmanager
def migration_lock(
    database_url: str, on_wait: OnWait | None = None
) -> Iterator[tuple[psycopg.Connection[Any], bool]]:
    """Hold the migration lock for the block, in a session of its own (autocommit: it
    holds no snapshot and no table lock that a concurrent index build would wait
    for). Yields the session and whether another migrate held the lock first.
    Closing the session releases the lock, as does the death of the process."""
    session = connect_sync(database_url, ApplicationName.MIGRATE, autocommit=True)
    try:
        yield session, _acquire(session, on_wait)
    finally:
        session.close()


def _acquire(session: psycopg.Connection[Any], on_wait: OnWait | None) -> bool:
    waited = False
    while not _value(session, "migrate_try_lock"):
        if not waited and on_wait is not None:
            on_wait()
        waited = True
        # Polled, not blocked on: see migrate.sql, migrate_try_lock.
        time.sleep(LOCK_POLL_SECONDS)
    return waited


def _starting_point(session: psycopg.Connection[Any]) -> _StartingPoint:
    (start,) = _rows(session, "migrate_starting_point")
    revision = _value(session, "schema_revision") if start["history_exists"] else None
    return _StartingPoint(bool(start["slot_table_exists"]), revision)


def _require_slot_table_on_the_search_path(
    session: psycopg.Connection[Any], start: _StartingPoint
) -> None:
    """Never a second availability_slots: when the search_path finds none but another
    schema holds one, that is the calendar's, and only pointing at it helps."""
    if start.slot_table_exists:
        return
    (found,) = _rows(session, "slot_table_elsewhere")
    if found["schemas"]:
        raise SlotTableElsewhereError(
            found["schemas"], found["search_path"], found["role"], changed=False
        )


def _require_adoptable(session: psycopg.Connection[Any]) -> None:
    """Before anything changes: every reason the calendar's table cannot be adopted."""
    if problems := migration_context.adoption_problems(session):
        raise ContractMismatchError(problems)


def _rows(session: psycopg.Connection[Any], name: str) -> list[dict[str, Any]]:
    """A named statement's rows, each by column name."""
    with session.cursor(row_factory=dict_row) as cursor:
        return cursor.execute(query(name)).fetchall()


def _value(session: psycopg.Connection[Any], name: str) -> Any:
    """The first column of a named statement's one row (None: no row)."""
    row = session.execute(query(name)).fetchone()
    return None if row is None else row[0]


def _head() -> str:
    head = head_revision()
    if head is None:
        raise MigrationError("no migrations found in the package")
    return head


def _offline_header(adopt: bool, from_revision: str | None, head: str, lock_timeout_ms: int) -> str:
    start = from_revision or ("a database holding only the calendar's table" if adopt else "empty")
    table = "the calendar's, adopted (--adopt)" if adopt else "created by migration 0001"
    lines = [
        f"-- slot-expiration migrations from {start} to {head}, availability_slots being",
        f"-- {table}. Written offline (--sql), without looking at the database: review it,",
        "-- then run it as the owner of availability_slots, no `slot-expiration migrate`",
        "-- running meanwhile:  psql -v ON_ERROR_STOP=1 -f <this file>",
        f"-- Every statement waits at most {lock_timeout_ms} ms for a lock (lock_timeout),",
        "-- except the CREATE/DROP INDEX CONCURRENTLY builds: they block no write, but wait",
        "-- for older transactions to end.",
    ]
    if adopt:
        lines += [
            "-- Adopting: the guard (0001) stops the script unless availability_slots fits the",
            "-- table contract. The calendar's own ix_availability_slots_status_start, if it",
            "-- has one, is kept (IF NOT EXISTS); the slot context's indexes (0003) and the",
            "-- autovacuum setting (0005) are not applied to the calendar's table.",
        ]
    return "\n".join(lines) + "\n\n"


@contextmanager
def _translated() -> Iterator[None]:
    """The driver's, SQLAlchemy's and Alembic's errors as the store's, once."""
    try:
        yield
    except sqlalchemy.exc.DBAPIError as exc:
        if isinstance(exc.orig, psycopg.Error):
            raise translate(exc.orig) from exc
        raise StoreError(first_line(exc)) from exc
    except psycopg.Error as exc:
        raise translate(exc) from exc
    except alembic.util.CommandError as exc:
        raise MigrationError(f"migration failed: {first_line(exc)}") from exc
