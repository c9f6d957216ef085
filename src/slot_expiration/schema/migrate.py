"""Applies the Alembic migrations shipped inside the package: one migrate at a time,
adopting the calendar's availability_slots where it exists, never on a schema ahead.

Before Alembic starts, `upgrade` makes sure it has a server session of its own (it
refuses a pooler in transaction mode, which would scatter its lock and settings over
pooled sessions), takes the migration lock there (several migrate Jobs may start at
once: one migrates, the others wait, then find the schema at head), checks that the
availability_slots its search_path finds is the one meant (schema.location), then reads
where the database stands:

- a revision ahead of this release (a newer release migrated first): nothing to
  do, and said so; migrations only add, so this release runs on it;
- no availability_slots on the search_path, but one in another schema: the
  calendar's, never duplicated: refused, saying how to point at it;
- an existing availability_slots never migrated by us: the calendar's table. It
  is adopted only if it fits the table contract and migrate may add the worker's
  objects beside it; otherwise every problem is named and nothing is changed;
- a schema migrated before: what the worker owns and is missing at its revision is
  created again first (a repair: _repair), then the newer migrations run.

Every statement waits for a lock one short try at most (LOCK_TRY_MS): a step that
needs a lock the calendar's writes hold gives up at once rather than queue them behind
it, and the whole step is tried again after a growing pause, until the lock timeout
(--lock-timeout-seconds) has passed in all. Each migration is a transaction of its own
and creates only what is missing, so a step that gives up leaves the schema at the last
migration that finished, and the next migrate resumes there.

`upgrade_sql` prints the SQL instead of running it (Alembic's offline mode), for
a DBA to review; it cannot look at the database (see migration_context).
"""

from __future__ import annotations

import io
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Final, TypeVar
from uuid import uuid4

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

from slot_expiration.db.errors import (
    LOCK_NOT_AVAILABLE,
    ContractMismatchError,
    MigrationError,
    MisconfiguredStoreError,
    SlotTableElsewhereError,
    StoreError,
    TransientStoreError,
    first_line,
    translate,
)
from slot_expiration.db.session import ApplicationName, connect_sync, milliseconds
from slot_expiration.db.statements import query
from slot_expiration.options.database_url import quoted_identifier, search_path_of
from slot_expiration.options.settings import DEFAULT_LOCK_TIMEOUT_SECONDS
from slot_expiration.schema import migration_context
from slot_expiration.schema.location import SlotTableIdentity
from slot_expiration.schema.version import (
    VERSION_TABLE,
    SchemaPosition,
    position_of,
    unknown_revision,
)

_SCRIPT_LOCATION = "slot_expiration.schema:migrations"
# The worker's default --lock-timeout-seconds: no statement of a migration queues
# the calendar's writes behind its lock for longer.
DEFAULT_LOCK_TIMEOUT_MS: Final = milliseconds(DEFAULT_LOCK_TIMEOUT_SECONDS)
# How often a migrate waiting for another tries the lock again (see migrate.sql,
# migrate_try_lock, for why it polls instead of blocking).
LOCK_POLL_SECONDS: Final = 0.25
# How long one statement of a migration waits for a lock: the longest a calendar write
# queues behind migrate. A step that gives up is tried again, after a pause that doubles
# from this up to LOCK_PAUSE_MAX_SECONDS (each with jitter), until the lock timeout.
LOCK_TRY_MS: Final = 100
LOCK_PAUSE_MAX_SECONDS: Final = 2.0

OnWait = Callable[[], None]
T = TypeVar("T")


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
    """The newest revision as Alembic finds it (the worker uses schema.version.HEAD_REVISION)."""
    return ScriptDirectory.from_config(_config(None)).get_current_head()


def engine_for(database_url: str, lock_timeout_ms: int | None = None) -> Engine:
    """A SQLAlchemy engine whose connections psycopg opens from our URL as it is.

    SQLAlchemy's own URL parser knows fewer forms than libpq (multi-host lists,
    an empty port with ?port=); letting psycopg connect accepts every URL the
    worker itself accepts. Each session has the settings migrate relies on
    (_settle); with `lock_timeout_ms`, it waits no longer for a lock (migrations lift
    it only to build indexes CONCURRENTLY).
    """

    def connect() -> psycopg.Connection[Any]:
        connection = connect_sync(database_url, ApplicationName.MIGRATE)
        with _translated():
            _settle(connection, database_url, lock_timeout_ms)
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
    on_lock_wait: OnWait | None = None,
    sandbox: bool = False,
) -> MigrationOutcome:
    """Bring the schema to the newest revision; a no-op when it is there or ahead.

    `on_wait` is told once when another migrate holds the lock and this one waits;
    `on_lock_wait` once when a step gave up on a lock the calendar's transactions hold
    and is tried again (see the module's docstring), for `lock_timeout_ms` in all.
    `sandbox`: the search_path's first schema is a scratch calendar of its own (the
    benchmark's), whose availability_slots is created there even though another
    schema holds the calendar's; `migrate` itself never passes it.
    """
    head = _head()
    patience = _Patience(lock_timeout_ms, on_lock_wait)
    with _translated(), migration_lock(database_url, on_wait) as (session, waited):
        # What the database was before this migrate: a try cut short by a lock leaves the
        # migrations it finished committed, and the next try starts from there.
        before = _starting_point(session)
        outcome = patience.retry(
            lambda: _upgrade(session, database_url, head, sandbox=sandbox),
            lambda: _revision_now(session),
        )
        return replace(
            outcome,
            before=before.revision,
            adopted=outcome.adopted or (before.adopting and not outcome.ahead),
            waited=waited,
        )


def _upgrade(
    session: psycopg.Connection[Any], database_url: str, head: str, *, sandbox: bool
) -> MigrationOutcome:
    """One try of `upgrade`, on the migration lock's session."""
    identity = _slot_table_identity(session)
    refusal = identity.refusal(requested=_requested(database_url), adopting=True)
    if refusal is not None and not sandbox:
        raise refusal
    start = _starting_point(session)
    if not sandbox:
        _require_slot_table_on_the_search_path(session, start)
    position = position_of(start.revision, head)
    if position is SchemaPosition.AHEAD:
        return MigrationOutcome(start.revision, start.revision, ahead=True)
    if position is SchemaPosition.UNKNOWN:
        raise MigrationError(f"{unknown_revision(str(start.revision))}: nothing changed")
    if start.adopting:
        _require_adoptable(session)
    config = _config(database_url, LOCK_TRY_MS)
    repaired: tuple[str, ...] = ()
    if start.revision is not None:
        repaired = _repair(session, config, start.revision, LOCK_TRY_MS, position)
    if position is not SchemaPosition.CURRENT:
        command.upgrade(config, "head")
    moved = _record_slot_table(session, identity)
    return MigrationOutcome(
        before=start.revision,
        after=head,
        adopted=start.adopting,
        notes=(*repaired, *config.attributes.get(migration_context.NOTES, ()), *moved),
        repaired=bool(repaired),
    )


class _Patience:
    """Tries a step again while it gives up on a lock (55P03), after a pause that grows,
    until `lock_timeout_ms` has passed; then says where the schema was left."""

    def __init__(self, lock_timeout_ms: int, on_lock_wait: OnWait | None) -> None:
        self._limit_seconds = lock_timeout_ms / 1000
        self._on_lock_wait = on_lock_wait

    def retry(self, step: Callable[[], T], revision_now: Callable[[], str | None]) -> T:
        deadline = time.monotonic() + self._limit_seconds
        pause = LOCK_TRY_MS / 1000
        told = False
        while True:
            try:
                with _translated():
                    return step()
            except TransientStoreError as exc:
                if exc.sqlstate != LOCK_NOT_AVAILABLE:
                    raise
                waited = pause * random.uniform(0.5, 1.5)  # noqa: S311 - jitter, not a secret
                if time.monotonic() + waited > deadline:
                    raise LockWaitError(self._limit_seconds, revision_now(), exc) from exc
                if not told and self._on_lock_wait is not None:
                    self._on_lock_wait()
                told = True
                time.sleep(waited)
                pause = min(pause * 2, LOCK_PAUSE_MAX_SECONDS)


class LockWaitError(MigrationError):
    """A step of migrate found its lock held for longer than the lock timeout: it gave up,
    the calendar's writes having waited at most one try behind it each time."""

    def __init__(self, limit_seconds: float, revision: str | None, cause: StoreError) -> None:
        where = f"at {revision}" if revision else "not yet migrated"
        super().__init__(
            f"gave up after {limit_seconds:g} s of tries of {LOCK_TRY_MS} ms each: another "
            f"transaction holds a lock a step needs ({cause}); the calendar's writes never "
            f"queued behind migrate for more than {LOCK_TRY_MS} ms; the schema is {where}, "
            "and migrate resumes from there: run it again once that transaction ended, or "
            "with a longer --lock-timeout-seconds",
            LOCK_NOT_AVAILABLE,
        )


def _revision_now(session: psycopg.Connection[Any]) -> str | None:
    try:
        return _starting_point(session).revision
    except psycopg.Error:
        return None


def _requested(database_url: str) -> bool:
    """Whether the URL's options name the search_path (--schema): then that is the meant."""
    return search_path_of(database_url) is not None


def _slot_table_identity(session: psycopg.Connection[Any]) -> SlotTableIdentity:
    (found,) = _rows(session, "slot_table_identity")
    identity = SlotTableIdentity(**found)
    if not identity.records_schema:
        return identity
    recorded = [row["slot_table_schema"] for row in _rows(session, "slot_table_recorded")]
    return SlotTableIdentity(**{**found, "recorded_in": recorded[0] if recorded else None})


def _record_slot_table(
    session: psycopg.Connection[Any], before: SlotTableIdentity
) -> tuple[str, ...]:
    """Record which availability_slots the worker adopted (after migration 0008); a note
    when it moved (--schema naming the calendar's new schema)."""
    changed = _rows(session, "record_slot_table_schema")
    if not changed or before.recorded_in is None:
        return ()
    now = changed[0]["slot_table_schema"]
    return (f"recorded availability_slots in schema {now}, no longer {before.recorded_in}",)


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
    "slot_expiration_pauses": "the pause in force (the replicas go on at their next tick) and "
    "the record of past ones",
    VERSION_TABLE: "the record of the revision: migrate then adopts availability_slots again",
}


def upgrade_sql(
    *,
    adopt: bool = False,
    from_revision: str | None = None,
    lock_timeout_ms: int = DEFAULT_LOCK_TIMEOUT_MS,
    schema: str | None = None,
) -> str:
    """The SQL `upgrade` would run, from `from_revision` (None: an empty database, or
    with `adopt` one holding only the calendar's table), without a database; with
    `schema`, on that schema alone (the script sets its search_path first)."""
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
    return _offline_header(adopt, from_revision, head, lock_timeout_ms, schema) + output.getvalue()


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
    for), with the settings migrate relies on. Yields the session and whether another
    migrate held the lock first. Closing the session releases the lock, as does the
    death of the process. Refused, before anything is set or locked, when the URL
    reaches the database through a pooler in transaction mode."""
    session = connect_sync(database_url, ApplicationName.MIGRATE, autocommit=True)
    try:
        _require_own_session(session, database_url)
        _settle(session, database_url, LOCK_TRY_MS)
        yield session, _acquire(session, on_wait)
    finally:
        session.close()


def _require_own_session(session: psycopg.Connection[Any], database_url: str) -> None:
    """Refuse a pooler in transaction mode (see migrate.sql, migrate_mark_session): the
    migration lock and the session's settings would land on pooled server sessions
    (and stay there, for other clients), each transaction on any of them."""
    token = uuid4().hex
    session.execute(query("migrate_mark_session"), {"token": token})
    kept = _value(session, "migrate_session_mark") == token
    with connect_sync(database_url, ApplicationName.MIGRATE, autocommit=True) as other:
        shared = _value(other, "migrate_session_mark") == token
        if shared:
            other.execute(query("migrate_unmark_session"))
    if kept and not shared:
        session.execute(query("migrate_unmark_session"))
        return
    raise MisconfiguredStoreError(
        "migrate needs a server session of its own for its whole run (it holds a lock and "
        "settings across transactions), but this URL reaches the database through a "
        "pooler in transaction mode: two of its transactions ran on different server "
        "sessions; run migrate on a URL that reaches PostgreSQL directly, or through a "
        "pool in session mode (once, run and status work through this one); nothing changed"
    )


def _settle(
    connection: psycopg.Connection[Any], database_url: str, lock_timeout_ms: int | None
) -> None:
    """The settings every migrate session relies on (migrate.sql, migrate_session_settings),
    for the session: the URL's search_path even where a pooler dropped its options."""
    params = {
        "search_path": search_path_of(database_url),
        "lock_timeout": None if lock_timeout_ms is None else str(lock_timeout_ms),
    }
    connection.execute(query("migrate_session_settings"), params)


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


def _offline_header(
    adopt: bool, from_revision: str | None, head: str, lock_timeout_ms: int, schema: str | None
) -> str:
    start = from_revision or ("a database holding only the calendar's table" if adopt else "empty")
    table = "the calendar's, adopted (--adopt)" if adopt else "created by migration 0001"
    # The schema's name is never written into a comment: a line break in it would end
    # the comment; the SET below quotes it.
    where = "in the schema --schema names (set below)" if schema else "on the search_path"
    lines = [
        f"-- slot-expiration migrations from {start} to {head}, availability_slots",
        f"-- being {table}, {where}.",
        "-- Written offline (--sql), without looking at the database: review it, then run",
        "-- it as the owner of availability_slots, no `slot-expiration migrate` running",
        "-- meanwhile:  psql -v ON_ERROR_STOP=1 -f <this file>",
        f"-- Every statement waits at most {lock_timeout_ms} ms for a lock (lock_timeout),",
        "-- except the CREATE/DROP INDEX CONCURRENTLY builds: they block no write, but wait",
        "-- for older transactions to end. Its first step stops it, nothing changed, where",
        "-- availability_slots is in a schema the search_path misses"
        + ("." if adopt else ", or exists already"),
    ]
    if not adopt:
        lines.append("-- (print the adoption script with --adopt then).")
    if adopt:
        lines += [
            "-- Adopting: the guard (0001) stops the script unless availability_slots fits the",
            "-- table contract. The calendar's own ix_availability_slots_status_start, if it",
            "-- has one, is kept (IF NOT EXISTS); the slot context's indexes (0003) and the",
            "-- autovacuum setting (0005) are not applied to the calendar's table.",
        ]
    if schema:
        lines += ["", f"SET search_path = {quoted_identifier(schema)};"]
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
