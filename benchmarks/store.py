"""The benchmark's repository: runs the named statements of bench.sql (beside it).

It owns the benchmark's schema (`slot_expiration_bench`), loads and resets its
table, runs the bare batch statement the worker is measured against, and reads
what the report shows about the server and the table. Every session it opens
is autocommit, so one statement is one transaction and one round trip.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, LiteralString, Self
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from psycopg import sql

from slot_expiration.db.errors import (
    INSUFFICIENT_PRIVILEGE,
    MisconfiguredStoreError,
    StoreError,
)
from slot_expiration.db.session import ApplicationName, Session, SessionSettings
from slot_expiration.db.statements import load_package_queries, query
from slot_expiration.expiry.store import Selection

BENCH_SCHEMA = "slot_expiration_bench"


def with_server_option(url: str, option: str) -> str:
    """The URL with one more libpq `options` entry (`-c name=value`), the others kept."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    given = [value for key, value in pairs if key == "options"]
    rest = [(key, value) for key, value in pairs if key != "options"]
    merged = " ".join([*given, option])
    return urlunsplit(
        parts._replace(query=urlencode([*rest, ("options", merged)], quote_via=quote))
    )


def bench_query(name: str) -> LiteralString:
    """A statement of bench.sql, or else the product's own of the same name (the
    benchmark measures the worker's statements too)."""
    return load_package_queries("benchmarks").get(name) or query(name)


class BenchSchemaExistsError(StoreError):
    def __init__(self) -> None:
        super().__init__(
            f"schema {BENCH_SCHEMA} already exists in this database (a benchmark running "
            f"now, or one that was killed): drop it first (DROP SCHEMA {BENCH_SCHEMA} CASCADE)"
        )


class BenchSchemaNotFirstError(StoreError):
    def __init__(self, schema: str | None) -> None:
        super().__init__(
            f"the benchmark's tables would land in schema {schema!r}, not {BENCH_SCHEMA}: "
            "the URL's options must not set search_path"
        )


@dataclass(frozen=True, slots=True)
class SlotTableSpec:
    """What bench_load_slots writes (see its comment in bench.sql)."""

    total: int
    due: int
    history: int
    consultants: int
    tenants: int
    stride: int
    as_of: datetime
    step: timedelta = timedelta(minutes=30)  # between a consultant's slots


@dataclass(frozen=True, slots=True)
class ActivityCounters:
    """What the server did by itself so far: checkpoints, and autovacuum and autoanalyze
    runs per table (by relid)."""

    checkpoints: int
    autovacuum_runs: Mapping[int, int]

    def autovacuum_runs_since(self, before: ActivityCounters) -> int:
        """Runs since `before`: on the tables there both times, and all of a table's since
        made. A table dropped meanwhile takes its runs with it (never a negative count)."""
        return sum(
            max(0, runs - before.autovacuum_runs.get(relid, 0))
            for relid, runs in self.autovacuum_runs.items()
        )


@dataclass(frozen=True, slots=True)
class CronRun:
    """A pg_cron job's run as cron.job_run_details recorded it."""

    status: str
    return_message: str
    start_time: datetime
    end_time: datetime

    @property
    def rows(self) -> int:
        """The rows of "UPDATE n", the command's result."""
        verb, _, count = self.return_message.strip().partition(" ")
        if verb != "UPDATE" or not count.isdigit():
            raise StoreError(f"the pg_cron job said {self.return_message!r}, not UPDATE n")
        return int(count)


@dataclass(frozen=True, slots=True)
class TableStats:
    live_tuples: int
    dead_tuples: int
    table_bytes: int
    index_bytes: int


class BenchStore:
    """One autocommit session on the benchmark's database."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.can_checkpoint = True  # until the server says this role may not
        self.checkpoints_run = 0

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, database_url: str, *, synchronous_commit: str | None = None
    ) -> AsyncIterator[Self]:
        """`synchronous_commit`: the session's own (the server's if None), for a bare
        loop that commits as the worker does."""
        # No server-side prepared statements, like the worker's sessions by default:
        # the floor does not move with psycopg's own choice of when to prepare.
        settings = SessionSettings(
            ApplicationName.BENCH, autocommit=True, standalone_statements=True
        )
        if synchronous_commit is not None:
            database_url = with_server_option(
                database_url, f"-c synchronous_commit={synchronous_commit}"
            )
        async with Session.open(database_url, settings, bench_query) as session:
            yield cls(session)

    # --- the schema -------------------------------------------------------------------

    async def create_schema(self) -> None:
        """Create the benchmark's schema; refuse to reuse one that exists."""
        if await self._value("bench_schema_exists"):
            raise BenchSchemaExistsError
        await self._execute("bench_create_schema")

    async def drop_schema(self) -> None:
        if await self._value("bench_schema_exists"):
            await self._execute("bench_drop_schema")

    async def require_bench_schema(self) -> None:
        """The session's unqualified names must resolve in the benchmark's schema."""
        schema = await self._value("bench_current_schema")
        if schema != BENCH_SCHEMA:
            raise BenchSchemaNotFirstError(schema)

    # --- the table --------------------------------------------------------------------

    async def load_slots(self, spec: SlotTableSpec) -> None:
        await self._execute(
            "bench_load_slots",
            {
                "total": spec.total,
                "due": spec.due,
                "history": spec.history,
                "consultants": spec.consultants,
                "tenants": spec.tenants,
                "stride": spec.stride,
                "as_of": spec.as_of,
                "step": spec.step,
            },
        )

    # --- section h: a calendar's own table, plain or partitioned by month -------------

    async def recreate_schema(self) -> None:
        """The benchmark's schema emptied: dropped with all it holds, and created again."""
        await self._execute("bench_drop_schema")
        await self._execute("bench_create_schema")

    async def create_plain_calendar(self) -> None:
        await self._execute("bench_create_plain_calendar")

    async def create_monthly_calendar(self, first: datetime, premake: int) -> None:
        """The calendar partitioned by month by pg_partman (installed in the benchmark's
        schema unless the database has it); StoreError if pg_partman is not there."""
        schema = await self._value("bench_partman_schema")
        if schema is None:
            if not await self._value("bench_partman_installable"):
                raise StoreError("pg_partman is not installed on this server")
            await self._execute("bench_create_partman")
            schema = BENCH_SCHEMA
        await self._execute("bench_create_monthly_calendar")
        create = self._session.template("bench_partman_create_parent").format(
            schema=sql.Identifier(str(schema)),
            premake=sql.Literal(premake),
            first=sql.Literal(first.strftime("%Y-%m-%d")),
        )
        await self._session.execute_composed(create)

    async def partitions(self) -> int:
        return int(await self._value("bench_partitions"))

    async def relation_bytes(self) -> tuple[int, int]:
        """(heap, indexes) of the slot table, its partitions summed."""
        row = (await self._fetch("bench_relation_bytes"))[0]
        return int(row[0]), int(row[1])

    async def empty_slots(self) -> None:
        await self._execute("bench_empty_slots")

    async def vacuum_analyze(self) -> None:
        await self._execute("bench_vacuum_analyze")

    async def analyze(self) -> None:
        await self._execute("bench_analyze")

    async def checkpoint(self) -> bool:
        """CHECKPOINT, if this role may (a superuser or pg_checkpoint); whether it ran."""
        if self.can_checkpoint:
            try:
                await self._execute("bench_checkpoint")
                self.checkpoints_run += 1
            except MisconfiguredStoreError as exc:
                if exc.sqlstate != INSUFFICIENT_PRIVILEGE:
                    raise
                self.can_checkpoint = False
        return self.can_checkpoint

    async def autovacuum(self, *, enabled: bool) -> None:
        await self._execute("bench_autovacuum_default" if enabled else "bench_autovacuum_off")

    async def expire_oldest(
        self, as_of: datetime, count: int, stamp: datetime | None = None
    ) -> int:
        """Expire the `count` oldest due rows, stamped `stamp` (AsOf by default: a stamp
        before AsOf keeps them expired through reset_backlog)."""
        params = {"as_of": as_of, "count": count, "stamp": stamp or as_of}
        return await self._rowcount("bench_expire_oldest", params)

    async def reset_backlog(self, since: datetime) -> int:
        return await self._rowcount("bench_reset_backlog", {"since": since})

    async def drained(self, since: datetime) -> tuple[int, int]:
        """(rows expired since `since`, how many of them did not rise by one version)."""
        rows = await self._fetch("bench_drained", {"since": since})
        return int(rows[0][0]), int(rows[0][1])

    async def count_due(self, as_of: datetime) -> int:
        return int(await self._value("count_backlog", {"as_of": as_of}))

    async def count_by_status(self) -> dict[str, int]:
        return {str(status): int(n) for status, n in await self._fetch("count_by_status")}

    async def table_stats(self) -> TableStats:
        row = (await self._fetch("bench_table_stats"))[0]
        return TableStats(*(int(value) for value in row))

    # --- the floor ----------------------------------------------------------------------

    async def bare_batch(self, as_of: datetime, batch_size: int) -> int:
        """One bare batch in its own transaction (autocommit: one round trip)."""
        return await self._rowcount("bench_bare_batch", {"as_of": as_of, "batch_size": batch_size})

    async def expire_all_due(self) -> int:
        """The single statement: every due row expired in one transaction (now())."""
        return await self._rowcount("bench_expire_all_due")

    # --- pg_cron, section g's peer ------------------------------------------------------

    async def create_cron_extension(self) -> None:
        await self._execute("bench_create_cron")

    async def cron_available(self) -> bool:
        try:
            return bool(await self._value("bench_cron_available"))
        except StoreError:
            return False

    async def schedule_single_statement(self, name: str) -> int:
        """The single statement as a pg_cron job at the next minute's start; its job id."""
        params = {"name": name, "command": bench_query("bench_cron_command")}
        return int(await self._value("bench_cron_schedule", params))

    async def cron_run(self, job: int) -> CronRun | None:
        """The job's first finished run, None until there is one."""
        rows = await self._fetch("bench_cron_run", {"job": job})
        if not rows:
            return None
        status, message, started, ended = rows[0]
        return CronRun(str(status), str(message or ""), started, ended)

    async def unschedule(self, job: int) -> None:
        await self._execute("bench_cron_unschedule", {"job": job})

    async def worker_statement(self, as_of: datetime, now: datetime, batch_size: int) -> int:
        """The worker's own batch statement sent alone, in autocommit: the same SQL as the
        worker's batch without its transaction around it. Rows expired."""
        params = Selection(as_of, now, batch_size).parameters()
        return int((await self._fetch("expire_batch", params))[0][0])

    async def explain(self, name: str, params: dict[str, Any]) -> str:
        """The executed plan of a named statement, with buffers; its changes rolled back."""
        statement = sql.SQL(bench_query("bench_explain_prefix")) + sql.SQL(" ")
        statement += sql.SQL(bench_query(name))
        rows = await self._session.rows_rolled_back(statement, params)
        return "\n".join(str(row[0]) for row in rows)

    # --- the booking load ---------------------------------------------------------------

    async def create_booking_candidates(self) -> None:
        await self._execute("bench_create_booking_candidates")

    async def fill_booking_candidates(self, as_of: datetime, count: int) -> int:
        await self._execute("bench_empty_booking_candidates")
        filled = await self._rowcount(
            "bench_fill_booking_candidates", {"as_of": as_of, "count": count}
        )
        await self._execute("bench_analyze_booking_candidates")
        return filled

    async def booked_candidates(self) -> int:
        return int(await self._value("bench_booked_candidates"))

    # --- worker processes ---------------------------------------------------------------

    @asynccontextmanager
    async def workers_gated(self) -> AsyncIterator[None]:
        """While inside, a worker's cycle waits at its first statement; all go on exit."""
        async with self._session.transaction():
            await self._execute("bench_gate_workers")
            yield

    async def workers_waiting(self) -> int:
        return int(await self._value("bench_workers_waiting"))

    # --- the server ---------------------------------------------------------------------

    async def activity_counters(self) -> ActivityCounters:
        """Checkpoints so far, and autovacuum and autoanalyze runs so far per table."""
        checkpoints = int(await self._value("bench_checkpoints"))
        runs = {int(relid): int(n) for relid, n in await self._fetch("bench_autovacuum_runs")}
        return ActivityCounters(checkpoints, runs)

    async def wal_position(self) -> str:
        return str(await self._value("bench_wal_position"))

    async def wal_bytes_since(self, position: str) -> int:
        return int(await self._value("bench_wal_bytes_since", {"since": position}))

    async def server_version(self) -> str:
        return str(await self._value("bench_server_version"))

    async def server_settings(self, names: Sequence[str]) -> dict[str, str]:
        rows = await self._fetch("bench_server_settings", {"names": list(names)})
        return {str(name): str(value) for name, value in rows}

    # --- plumbing -----------------------------------------------------------------------

    async def _execute(self, name: str, params: dict[str, Any] | None = None) -> None:
        await self._session.execute(name, params)

    async def _rowcount(self, name: str, params: dict[str, Any] | None = None) -> int:
        return await self._session.execute(name, params)

    async def _fetch(
        self, name: str, params: dict[str, Any] | None = None
    ) -> list[tuple[Any, ...]]:
        return await self._session.rows(name, params)

    async def _value(self, name: str, params: dict[str, Any] | None = None) -> Any:
        return await self._session.value(name, params)


# The booking that section d's load sends: the slot context's own book-slot
# statement, in a transaction as the book operation runs it, after a statement
# that picks a candidate slot and gives the booking the rest of its parameters.
BOOKING_STATEMENT = "book_slot"


def booking_statements() -> tuple[str, ...]:
    """The statements of one booking, in order (pick, BEGIN, book-slot, COMMIT)."""
    return tuple(
        bench_query(name)
        for name in ("bench_pick_booking", "bench_begin", BOOKING_STATEMENT, "bench_commit")
    )
