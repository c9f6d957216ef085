"""The slot store: the one module that talks to PostgreSQL for the worker.

It runs the named statements of queries.sql, turns rows into frozen values
and translates psycopg's errors into ours (see errors.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Self
from uuid import UUID

import psycopg

from slot_expiration.domain import Slot, SlotRef, SlotStatus
from slot_expiration.store.errors import (
    CommitInDoubtError,
    NotQuarantinedError,
    RowRejectedError,
    SlotStoreError,
    StoreConnectError,
    first_line,
    translate,
)
from slot_expiration.store.queries import query

APPLICATION_NAME = "slot-expiration"
_PREPARE_AFTER = 2  # executions of one statement on a connection before it is prepared


@dataclass(frozen=True, slots=True)
class LockedBatch:
    """What one selection took: the slots, oldest first, and the rows it passed over.

    `previous_attempts[i]` is how often `slots[i]` was rejected before (0 when it
    is not in quarantine; only the row-by-row path reads it).
    """

    slots: tuple[SlotRef, ...]
    skipped_locked_count: int
    previous_attempts: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class QuarantineEntry:
    """A rejected row as the quarantine records it."""

    slot_id: UUID
    attempts: int
    next_attempt_at: datetime
    sqlstate: str
    message: str


@dataclass(frozen=True, slots=True)
class SessionLimits:
    """Server-side limits of a worker transaction, a backstop to the client's own budget.

    If the worker process freezes mid-batch, PostgreSQL itself ends the
    statement or the idle transaction, so no row lock outlives the budget.
    """

    statement_timeout_ms: int
    idle_in_transaction_timeout_ms: int
    lock_timeout_ms: int = 2_000
    connect_timeout_seconds: int = 10
    # Server-side prepared statements save planning in long drains, but a pooler in
    # transaction mode (pgbouncer before 1.21) hands the next transaction to a server
    # session that never saw them: off unless asked for.
    prepared_statements: bool = False

    def parameters(self) -> dict[str, str]:
        return {
            "statement_timeout": str(self.statement_timeout_ms),
            "idle_timeout": str(self.idle_in_transaction_timeout_ms),
            "lock_timeout": str(self.lock_timeout_ms),
        }


# After a cancellation, how long COMMIT or ROLLBACK may still wait for the server's
# answer. Past it (a dead network) the connection is closed: the server rolls the
# transaction back, unless the COMMIT had already reached it.
ANSWER_GRACE_SECONDS = 3.0


async def _run_to_completion(
    step: Coroutine[Any, Any, None],
    abort: Callable[[], Awaitable[None]],
    in_doubt: BaseException | None = None,
    grace_seconds: float = ANSWER_GRACE_SECONDS,
) -> bool:
    """Run COMMIT or ROLLBACK even if the caller is cancelled meanwhile.

    Once sent, the outcome is decided by the server; abandoning the wait would
    only hide it. But a cancelled caller waits at most `grace_seconds` more:
    then `abort()` closes the connection and `in_doubt` is raised (for COMMIT,
    whose outcome is then unknown), else the cancellation goes on.
    Returns whether a cancellation arrived meanwhile.
    """
    task = asyncio.ensure_future(step)
    cancelled_at: float | None = None
    loop = asyncio.get_running_loop()
    while not task.done():
        timeout = None if cancelled_at is None else cancelled_at + grace_seconds - loop.time()
        if timeout is not None and timeout <= 0:
            await abort()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise in_doubt or asyncio.CancelledError()
        try:
            await asyncio.wait({task}, timeout=timeout)
        except asyncio.CancelledError:
            cancelled_at = cancelled_at or loop.time()  # a second cancel does not restart it
    task.result()  # the step's own error, if it failed
    return cancelled_at is not None


class SlotStore:
    """Repository over `availability_slots` on one connection."""

    def __init__(self, connection: psycopg.AsyncConnection[Any], limits: SessionLimits) -> None:
        self._conn = connection
        self._limits = limits

    @classmethod
    @asynccontextmanager
    async def connect(cls, database_url: str, limits: SessionLimits) -> AsyncIterator[Self]:
        """Open a connection for one cycle (or one command) and close it afterwards."""
        try:
            conn = await psycopg.AsyncConnection.connect(
                database_url,
                application_name=APPLICATION_NAME,
                connect_timeout=limits.connect_timeout_seconds,
                prepare_threshold=_PREPARE_AFTER if limits.prepared_statements else None,
            )
        except psycopg.Error as exc:
            raise StoreConnectError(first_line(exc)) from exc
        try:
            yield cls(conn, limits)
        finally:
            await conn.close()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """One atomic unit: committed whole on success, rolled back whole otherwise.

        It starts by setting the session limits for itself (see transaction_limits).
        """
        try:
            await self._fetch_all("transaction_limits", self._limits.parameters())
            yield
        except BaseException:
            await self._rollback_quietly()
            raise
        try:
            doubt = CommitInDoubtError(
                f"no answer to COMMIT within {ANSWER_GRACE_SECONDS:g} s of the cancellation: "
                "the batch may or may not have committed"
            )
            await _run_to_completion(self._conn.commit(), self._conn.close, doubt)
        except psycopg.Error as exc:
            raise translate(exc) from exc

    async def _rollback_quietly(self) -> None:
        # A broken connection cannot roll back; closing it makes the server do it.
        try:
            await _run_to_completion(self._conn.rollback(), self._conn.close)
        except psycopg.Error:
            await self._conn.close()

    async def expire_batch(self, as_of: datetime, now: datetime, batch_size: int) -> LockedBatch:
        """Lock and expire a batch in one statement; a rejected row fails it whole.

        Rows in quarantine until after `now` are passed over.
        """
        params = {"as_of": as_of, "now": now, "batch_size": batch_size}
        ids, tenant_ids, skipped = await self._fetch_one("expire_batch", params)
        return LockedBatch(slots=_slot_refs(ids, tenant_ids), skipped_locked_count=int(skipped))

    async def lock_batch(
        self, as_of: datetime, now: datetime, batch_size: int, exclude_ids: Sequence[UUID] = ()
    ) -> LockedBatch:
        """Lock a batch without changing it, for row-by-row expiry."""
        params = {
            "as_of": as_of,
            "now": now,
            "batch_size": batch_size,
            "exclude_ids": list(exclude_ids),
        }
        ids, tenant_ids, attempts, skipped = await self._fetch_one("lock_batch", params)
        return LockedBatch(
            slots=_slot_refs(ids, tenant_ids),
            skipped_locked_count=int(skipped),
            previous_attempts=tuple(int(a) for a in attempts),
        )

    async def quarantine(self, entries: Sequence[QuarantineEntry], now: datetime) -> None:
        """Record rejected rows (inside the batch's transaction)."""
        if not entries:
            return
        await self._execute(
            "quarantine_rows",
            {
                "now": now,
                "ids": [e.slot_id for e in entries],
                "attempts": [e.attempts for e in entries],
                "next_attempts": [e.next_attempt_at for e in entries],
                "sqlstates": [e.sqlstate for e in entries],
                "messages": [e.message for e in entries],
            },
        )

    async def release(self, slot_ids: Sequence[UUID]) -> None:
        """Drop these rows from the quarantine (they expired)."""
        if slot_ids:
            await self._execute("release_rows", {"ids": list(slot_ids)})

    async def retry_quarantined(
        self, slot_ids: Sequence[UUID], now: datetime, *, every: bool = False
    ) -> list[UUID]:
        """Make these (or `every`) quarantined slots due at `now`; returns them.

        Raises NotQuarantinedError if a named slot is not in the quarantine (the
        caller's transaction then rolls back: all or nothing).
        """
        params = {"ids": list(slot_ids), "now": now, "all": every}
        found = [row[0] for row in await self._fetch_all("retry_quarantined", params)]
        if missing := set(slot_ids) - set(found):
            raise NotQuarantinedError(sorted(str(slot_id) for slot_id in missing))
        return found

    async def purge_quarantine(self) -> None:
        """Forget quarantined rows that left Available some other way."""
        await self._execute("purge_quarantine", {})

    async def check_constraints_immediately(self) -> None:
        """From here to the end of the transaction, no constraint waits for COMMIT."""
        try:
            await self._conn.execute(query("check_constraints_immediately"))
        except psycopg.Error as exc:
            raise translate(exc) from exc

    async def expire_slot(self, slot_id: UUID, as_of: datetime) -> bool:
        """Expire one locked slot inside a savepoint, so a rejection spares the batch.

        Raises RowRejectedError carrying the slot id when the database refuses it.
        """
        try:
            async with self._conn.transaction():
                cursor = await self._conn.execute(
                    query("expire_slot"), {"id": slot_id, "as_of": as_of}
                )
                return await cursor.fetchone() is not None
        except psycopg.Error as exc:
            raise translate(exc, slot_id) from exc

    async def insert_slots(self, slots: Iterable[Slot]) -> None:
        params = [asdict(slot) | {"status": slot.status.value} for slot in slots]
        try:
            async with self._conn.cursor() as cursor:
                await cursor.executemany(query("insert_slot"), params)
        except psycopg.Error as exc:
            raise translate(exc) from exc

    async def count_by_status(self) -> dict[SlotStatus, int]:
        rows = await self._fetch_all("count_by_status", {})
        counts = dict.fromkeys(SlotStatus, 0)
        counts.update({SlotStatus(status): count for status, count in rows})
        return counts

    async def count_backlog(self, as_of: datetime) -> int:
        row = await self._fetch_one("count_backlog", {"as_of": as_of})
        return int(row[0])

    async def count_backlog_capped(self, as_of: datetime, cap: int) -> int:
        """Available rows due at `as_of`, counted up to `cap` at most."""
        row = await self._fetch_one("count_backlog_capped", {"as_of": as_of, "cap": cap})
        return int(row[0])

    async def schema_ready(self) -> bool:
        row = await self._fetch_one("schema_ready", {})
        return bool(row[0])

    async def _execute(self, name: str, params: dict[str, Any]) -> None:
        try:
            await self._conn.execute(query(name), params)
        except psycopg.Error as exc:
            raise translate(exc) from exc

    async def _fetch_one(self, name: str, params: dict[str, Any]) -> tuple[Any, ...]:
        rows = await self._fetch_all(name, params)
        if len(rows) != 1:
            raise SlotStoreError(f"statement {name} returned {len(rows)} rows, expected 1")
        return rows[0]

    async def _fetch_all(self, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        try:
            cursor = await self._conn.execute(query(name), params)
            return await cursor.fetchall()
        except psycopg.Error as exc:
            raise translate(exc) from exc


def _slot_refs(ids: Sequence[UUID], tenant_ids: Sequence[UUID]) -> tuple[SlotRef, ...]:
    return tuple(SlotRef(id=i, tenant_id=t) for i, t in zip(ids, tenant_ids, strict=True))


__all__ = [
    "APPLICATION_NAME",
    "LockedBatch",
    "QuarantineEntry",
    "RowRejectedError",
    "SessionLimits",
    "SlotStore",
]
