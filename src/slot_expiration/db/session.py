"""Sessions on the calendar's database: the one place that connects, runs named
statements and bounds transactions; the driver's errors are translated by errors.translated.

Every repository of the store (the worker's, the quarantine's, the status
views', the slot context's, the grants') runs on a Session; none touches
psycopg's connection or errors itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final, LiteralString, Self, TypeVar
from uuid import UUID

import psycopg
from psycopg import sql
from psycopg.rows import kwargs_row

from slot_expiration.db.errors import (
    CommitInDoubtError,
    StoreError,
    translated,
)
from slot_expiration.db.statements import query
from slot_expiration.options.database_url import search_path_of

Statements = Callable[[str], LiteralString]
R = TypeVar("R")


class ApplicationName:
    """How each kind of session shows in pg_stat_activity; `status` counts only WORKER."""

    WORKER: Final = "slot-expiration"
    PROBE: Final = "slot-expiration-probe"
    STATUS: Final = "slot-expiration-status"
    SLOTS: Final = "slot-expiration-slots"
    ADMIN: Final = "slot-expiration-admin"
    MIGRATE: Final = "slot-expiration-migrate"
    BENCH: Final = "slot-expiration-bench"
    HISTORY: Final = "slot-expiration-history"  # the worker writing a cycle's row, after it
    UI: Final = "slot-expiration-ui"


CONNECT_TIMEOUT_SECONDS: Final = 10
# After a cancellation, how long COMMIT or ROLLBACK may still wait for the server's
# answer. Past it (a dead network) the connection is closed: the server rolls the
# transaction back, unless the COMMIT had already reached it.
ANSWER_GRACE_SECONDS: Final = 3.0
_PREPARE_AFTER: Final = 2  # executions of one statement on a connection before it is prepared


def milliseconds(seconds: float) -> int:
    """A duration of the options (seconds) as the server's settings take it (ms)."""
    return math.ceil(seconds * 1000)


@dataclass(frozen=True, slots=True)
class TransactionLimits:
    """Server-side limits of each transaction, a backstop to the client's own budget:
    if the process freezes mid-transaction, PostgreSQL ends the statement or the idle
    transaction, so no lock outlives the budget. 0 means no limit."""

    statement_timeout_ms: int
    lock_timeout_ms: int
    idle_in_transaction_timeout_ms: int = 0
    read_only: bool = False
    # The transaction's synchronous_commit (PostgreSQL's word for it), or None for the
    # session's own: only the worker's cycle session sets it (options.SynchronousCommit).
    synchronous_commit: str | None = None

    def parameters(self) -> dict[str, str | bool | None]:
        """transaction_settings' parameters for the limits (session.sql)."""
        return {
            "statement_timeout": str(self.statement_timeout_ms),
            "idle_timeout": str(self.idle_in_transaction_timeout_ms),
            "lock_timeout": str(self.lock_timeout_ms),
            "synchronous_commit": self.synchronous_commit,
            "read_only": self.read_only,
        }


# transaction_settings' parameters for a session without limits: the session's own.
_NO_LIMITS: Final[dict[str, str | bool | None]] = {
    "statement_timeout": None,
    "idle_timeout": None,
    "lock_timeout": None,
    "synchronous_commit": None,
    "read_only": False,
}


def opening_parameters(
    database_url: str, limits: TransactionLimits | None = None
) -> dict[str, str | bool | None]:
    """transaction_settings' parameters (session.sql) for a session on `database_url`:
    its limits, and the search_path the URL's options ask for (None: the session's)."""
    return {
        **(_NO_LIMITS if limits is None else limits.parameters()),
        "search_path": search_path_of(database_url),
    }


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """How to open a session. `prepare`: server-side prepared statements save planning
    in long drains, but a pooler in transaction mode (pgbouncer before 1.21) hands the
    next transaction to a server session that never saw them: off unless asked for."""

    application_name: str
    limits: TransactionLimits | None = None
    connect_timeout_seconds: int = CONNECT_TIMEOUT_SECONDS
    autocommit: bool = False
    prepare: bool = False
    # Statements may also run outside a transaction, each its own (autocommit): only the
    # benchmark's session, which runs VACUUM and CHECKPOINT and sets up its scratch
    # calendar. Every session of the product runs each statement in a transaction.
    standalone_statements: bool = False


@dataclass(slots=True)
class Transaction:
    """What became of a transaction: `committed` once the server confirmed COMMIT."""

    committed: bool = False


class CommittedThenCancelled(asyncio.CancelledError):
    """A cancellation that arrived while a transaction of one statement ran
    (Session.committed_record), delivered once its COMMIT had been answered: it
    committed, and `result` is what its statement returned."""

    def __init__(self, result: Any) -> None:
        super().__init__()
        self.result = result


async def run_to_completion(
    step: Coroutine[Any, Any, R],
    abort: Callable[[], Awaitable[None]],
    in_doubt: Callable[[], BaseException] | None = None,
    grace_seconds: float = ANSWER_GRACE_SECONDS,
    interrupt: Callable[[], Awaitable[None]] | None = None,
) -> tuple[R, bool]:
    """Run a step that ends a transaction (COMMIT, ROLLBACK, or a pipeline that ends in
    COMMIT) even if the caller is cancelled meanwhile.

    Once sent, the outcome is decided by the server; abandoning the wait would
    only hide it. But a cancelled caller waits at most `grace_seconds` more:
    then `abort()` closes the connection and `in_doubt()` is raised (for COMMIT,
    whose outcome is then unknown), else the cancellation goes on. At the first
    cancellation, `interrupt()` (if given) asks the server to stop a statement
    still running, so the wait is for its rollback, not for its end.
    Returns the step's result and whether a cancellation arrived meanwhile: the
    caller must deliver it. A step that failed raises its error, or, when a
    cancellation arrived meanwhile, that cancellation (the error its cause): it
    is never lost behind the step's failure.
    """
    task = asyncio.ensure_future(step)
    cancelled_at: float | None = None
    interrupting: asyncio.Future[None] | None = None
    loop = asyncio.get_running_loop()
    try:
        while not task.done():
            timeout = None if cancelled_at is None else cancelled_at + grace_seconds - loop.time()
            if timeout is not None and timeout <= 0:
                await abort()
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise asyncio.CancelledError() if in_doubt is None else in_doubt()
            try:
                await asyncio.wait({task}, timeout=timeout)
            except asyncio.CancelledError:
                if cancelled_at is None and interrupt is not None:
                    interrupting = asyncio.ensure_future(interrupt())
                cancelled_at = cancelled_at or loop.time()  # a second cancel does not restart it
    finally:
        if interrupting is not None:
            await asyncio.gather(interrupting, return_exceptions=True)
    if cancelled_at is not None and (failure := task.exception()) is not None:
        raise asyncio.CancelledError from failure
    return task.result(), cancelled_at is not None  # the step's own error, if it failed


class Session:
    """One connection: statements by name, bounded transactions, errors translated.

    Every transaction starts by setting what the statements rely on for itself
    (session.sql, transaction_settings): the limits, the time zone and styles, and
    the `search_path` the URL's options ask for (`search_path`; None: the session's).
    """

    def __init__(
        self,
        connection: psycopg.AsyncConnection[Any],
        settings: SessionSettings,
        statements: Statements = query,
        search_path: str | None = None,
    ) -> None:
        self.connection = connection
        self._settings = settings
        self._statements = statements
        self._opening = {
            **(_NO_LIMITS if settings.limits is None else settings.limits.parameters()),
            "search_path": search_path,
        }
        self._in_transaction = False
        self._opening_pending = False

    @property
    def search_path_requested(self) -> bool:
        """Whether the URL's options name the search_path (--schema): each transaction
        sets it, and the availability_slots it finds is the one meant."""
        return self._opening["search_path"] is not None

    @classmethod
    @asynccontextmanager
    async def open(
        cls, database_url: str, settings: SessionSettings, statements: Statements = query
    ) -> AsyncIterator[Self]:
        """A session for one cycle (or one command), closed at the end of the block."""
        with translated(connecting=True):
            conn = await psycopg.AsyncConnection.connect(
                database_url,
                application_name=settings.application_name,
                connect_timeout=settings.connect_timeout_seconds,
                autocommit=settings.autocommit,
                prepare_threshold=_PREPARE_AFTER if settings.prepare else None,
            )
            if not settings.autocommit:  # psycopg's own BEGIN, as begin_transaction's
                await conn.set_isolation_level(psycopg.IsolationLevel.READ_COMMITTED)
        try:
            yield cls(conn, settings, statements, search_path_of(database_url))
        finally:
            await conn.close()

    async def rows(self, name: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        with translated():
            cursor = await self._run(name, params, self.connection.cursor())
            return await cursor.fetchall() if cursor.description is not None else []

    async def records(
        self, name: str, row: Callable[..., R], params: dict[str, Any] | None = None
    ) -> list[R]:
        """Each row of a named statement as `row` builds it from the columns by name (a
        dataclass whose fields the statement's column names match): psycopg's row
        factory, never unpacked by position."""
        with translated():
            cursor = self.connection.cursor(row_factory=kwargs_row(row))
            await self._run(name, params, cursor)
            return await cursor.fetchall()

    async def record(
        self, name: str, row: Callable[..., R], params: dict[str, Any] | None = None
    ) -> R:
        """The one row a statement returns (an aggregate, say), built by `row`."""
        return _one(name, await self.records(name, row, params))

    async def column(self, name: str, params: dict[str, Any] | None = None) -> list[Any]:
        """The one column of a statement's rows (ids it returns, say)."""
        return [row[0] for row in await self.rows(name, params)]

    async def row(self, name: str, params: dict[str, Any] | None = None) -> tuple[Any, ...]:
        """The one row a statement returns (an aggregate, say)."""
        return _one(name, await self.rows(name, params))

    async def value(self, name: str, params: dict[str, Any] | None = None) -> Any:
        return (await self.row(name, params))[0]

    async def execute(self, name: str, params: dict[str, Any] | None = None) -> int:
        """Run a statement for its effect; returns the rows it touched."""
        with translated():
            cursor = await self._run(name, params, self.connection.cursor())
        return cursor.rowcount

    async def execute_many(self, name: str, params: Sequence[dict[str, Any]]) -> None:
        with translated():
            await self._open_if_pending()
            async with self.connection.cursor() as cursor:
                await cursor.executemany(self._statement(name), params)

    async def execute_composed(self, statement: sql.Composed) -> None:
        """A statement composed with psycopg.sql from a named template (GRANT, say)."""
        with translated():
            await self._open_if_pending()
            await self.connection.execute(statement)

    async def rows_rolled_back(
        self, statement: sql.Composed, params: dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        """Run a composed statement (EXPLAIN ANALYZE of a named one, say) in a transaction
        that is rolled back whatever it did: nothing it changes stays."""
        with translated():
            async with self.connection.transaction(force_rollback=True):
                cursor = await self.connection.execute(statement, params)
                return await cursor.fetchall()

    def template(self, name: str) -> sql.SQL:
        """A named statement whose identifiers are filled in with psycopg.sql.format."""
        return sql.SQL(self._statements(name))

    def _statement(self, name: str) -> LiteralString:
        """A named statement to run now: only inside a transaction, whose first statement
        set what it relies on (outside, it would run on the session's own settings)."""
        if not (self._in_transaction or self._settings.standalone_statements):
            raise StoreError(f"statement {name} run outside a transaction")
        return self._statements(name)

    def render(self, statement: sql.Composable) -> str:
        return statement.as_string(self.connection)

    @asynccontextmanager
    async def transaction(self, *, dry_run: bool = False) -> AsyncIterator[Transaction]:
        """One atomic unit, committed whole on success, rolled back whole otherwise
        (and, as a `dry_run`, rolled back on success too: nothing it did stays).

        It starts by setting what its statements rely on for itself (SET LOCAL, so a
        pooler in transaction mode keeps them to this transaction: see Session). COMMIT
        and ROLLBACK finish even if a cancellation arrives meanwhile (bounded, see
        run_to_completion), and that cancellation is delivered once they have.

        BEGIN and its settings go with the transaction's first statement (_run), in one
        pipeline; COMMIT (or ROLLBACK) is a message of its own, so its outcome is known
        apart from the statement's.
        """
        outcome = Transaction()
        async with self._rolled_back_on_failure():
            self._opening_pending = True  # sent with the first statement (_run)
            yield outcome
        if dry_run:
            if await self._rollback_quietly():
                raise asyncio.CancelledError
            return
        if await self._commit():
            outcome.committed = True
            raise asyncio.CancelledError
        outcome.committed = True

    async def _run(
        self, name: str, params: dict[str, Any] | None, cursor: psycopg.AsyncCursor[Any]
    ) -> psycopg.AsyncCursor[Any]:
        """Run a named statement on `cursor`; the transaction's first also sends its opening
        (BEGIN and transaction_settings), all three in one pipeline: one round trip where
        they were three. Measured (1,000 transactions of BEGIN, a set_config and a SELECT
        1, then COMMIT, three runs): 0.16-0.17 ms of the client's CPU each, against
        0.21-0.29 ms in four round trips; and two fewer waits on the network."""
        statement = self._statement(name)
        if not self._opening_pending:
            await cursor.execute(statement, params)
            return cursor
        self._opening_pending = False
        async with self.connection.pipeline() as pipeline:
            await self._send_opening()
            await cursor.execute(statement, params)
            await pipeline.sync()
        return cursor

    async def _open_if_pending(self) -> None:
        """The transaction's opening, alone (before a statement _run does not send)."""
        if self._opening_pending:
            self._opening_pending = False
            await self._send_opening()

    async def _send_opening(self) -> None:
        if self._settings.autocommit:
            await self.connection.execute(self._statements("begin_transaction"))
        await self.connection.execute(self._statements("transaction_settings"), self._opening)

    @asynccontextmanager
    async def savepoint(self, slot_id: UUID | None = None) -> AsyncIterator[None]:
        """A nested unit inside the transaction: its failure undoes only its own work.

        A row rejection inside it names `slot_id`, the row it was about.
        """
        with translated(slot_id):
            await self._open_if_pending()
            async with self.connection.transaction():
                yield

    async def committed_record(
        self, name: str, row: Callable[..., R], params: dict[str, Any] | None = None
    ) -> R:
        """The one row of a transaction of one statement (committed_records)."""
        try:
            found = await self.committed_records(name, row, params)
        except CommittedThenCancelled as cancel:
            raise CommittedThenCancelled(_one(name, cancel.result)) from None
        return _one(name, found)

    async def committed_records(
        self, name: str, row: Callable[..., R], params: dict[str, Any] | None = None
    ) -> list[R]:
        """A transaction of one statement, in one round trip: BEGIN, the transaction's
        settings, the statement and COMMIT go in one pipeline, and its rows come back
        (each built by `row`) once the COMMIT is answered. Where the statement or the
        COMMIT fails, the transaction is rolled back and the error raised: nothing
        committed.

        Measured (2,000 transactions of a one-row SELECT, 2 runs): 0.26-0.31 ms of the
        client's CPU each, against 0.51-0.61 ms with COMMIT in a round trip of its own
        (Session.transaction), and one wait on the network instead of two.

        A cancellation meanwhile asks the server to stop the statement (a COMMIT it
        already ran stays), waits for the answer (bounded, as run_to_completion), and
        is then delivered: as CommittedThenCancelled, carrying the rows, when it
        committed. Only on an autocommit session (whose BEGIN is the product's own).
        """
        if self._in_transaction or not self._settings.autocommit:
            raise StoreError(f"statement {name} is a transaction of its own")
        cursor = self.connection.cursor(row_factory=kwargs_row(row))

        async def round_trip() -> list[R]:
            async with self.connection.pipeline():
                await self._send_opening()
                await cursor.execute(self._statements(name), params)
                await self.connection.execute(self._statements("commit_transaction"))
            return await cursor.fetchall()

        def doubt() -> CommitInDoubtError:
            return CommitInDoubtError(
                f"no answer to {name} and its COMMIT within {ANSWER_GRACE_SECONDS:g} s of the "
                "cancellation: the batch may or may not have committed"
            )

        async with self._rolled_back_on_failure():
            with translated():
                found, cancelled = await run_to_completion(
                    round_trip(), self.connection.close, doubt, interrupt=self._interrupt
                )
        if cancelled:
            raise CommittedThenCancelled(found)
        return found

    @asynccontextmanager
    async def _rolled_back_on_failure(self) -> AsyncIterator[None]:
        """Inside a transaction: whatever fails in it rolls it back, and a cancellation that
        arrives during the ROLLBACK is delivered (the failure its cause)."""
        self._in_transaction = True
        try:
            yield
        except BaseException as failure:
            if await self._rollback_quietly():
                raise asyncio.CancelledError from failure
            raise
        finally:
            self._in_transaction = False
            self._opening_pending = False

    async def _interrupt(self) -> None:
        """Ask the server to cancel the statement this session runs (a cancel request on
        a connection of its own); one that cannot be sent leaves the grace to decide."""
        with contextlib.suppress(psycopg.Error):
            await self.connection.cancel_safe(timeout=ANSWER_GRACE_SECONDS)

    async def _commit(self) -> bool:
        """COMMIT; whether a cancellation arrived while it ran."""

        def doubt() -> CommitInDoubtError:
            return CommitInDoubtError(
                f"no answer to COMMIT within {ANSWER_GRACE_SECONDS:g} s of the cancellation: "
                "the batch may or may not have committed"
            )

        with translated():
            _, cancelled = await run_to_completion(
                self.connection.commit(), self.connection.close, doubt
            )
        return cancelled

    async def _rollback_quietly(self) -> bool:
        """ROLLBACK; whether a cancellation arrived while it ran. A broken connection
        cannot roll back: closing it makes the server do it."""
        try:
            _, cancelled = await run_to_completion(
                self.connection.rollback(), self.connection.close
            )
        except psycopg.Error:
            await self.connection.close()
            return False
        except asyncio.CancelledError:  # and the ROLLBACK failed: the server rolls back
            await self.connection.close()
            return True
        return cancelled


def _one(name: str, found: list[R]) -> R:
    if len(found) != 1:
        raise StoreError(f"statement {name} returned {len(found)} rows, expected 1")
    return found[0]


def connect_sync(
    database_url: str, application_name: str, *, autocommit: bool = False
) -> psycopg.Connection[Any]:
    """A blocking connection, for migrate (Alembic's engine, the migration lock's
    session); errors translated alike. Never prepared on the server: a statement
    polled (the migration lock's) would be after five runs, and a pooler may hand
    the next transaction a server session that never saw it."""
    with translated(connecting=True):
        return psycopg.connect(
            database_url,
            application_name=application_name,
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
            autocommit=autocommit,
            prepare_threshold=None,
        )
