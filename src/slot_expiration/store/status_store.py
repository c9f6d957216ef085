"""The operator's read-only view of the database: `status` and the worker's /readyz.

It runs the named statements of operations.sql in one read-only transaction on
a connection of its own (its own `application_name`, so it never counts as a
worker session) and turns rows into frozen values.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self
from uuid import UUID

import psycopg

from slot_expiration.domain import SlotStatus
from slot_expiration.store.errors import (
    SlotStoreError,
    StoreConnectError,
    first_line,
    translate,
)
from slot_expiration.store.queries import query
from slot_expiration.store.slot_store import APPLICATION_NAME

SELECTION_INDEX = "ix_availability_slots_status_start"
SLOT_TABLE = "availability_slots"


@dataclass(frozen=True, slots=True)
class OverdueSlot:
    """An Available slot whose start has passed."""

    id: UUID
    tenant_id: UUID
    start_at: datetime
    quarantined: bool


@dataclass(frozen=True, slots=True)
class WorkerSession:
    """A session of the worker in pg_stat_activity (None where the server hides it)."""

    pid: int
    state: str | None
    backend_start: datetime | None
    xact_start: datetime | None
    state_change: datetime | None
    wait_event_type: str | None
    wait_event: str | None


@dataclass(frozen=True, slots=True)
class FailedSlot:
    """A slot the database keeps rejecting, as the quarantine records it."""

    slot_id: UUID
    tenant_id: UUID
    attempts: int
    first_failed_at: datetime
    last_failed_at: datetime
    next_attempt_at: datetime
    sqlstate: str
    message: str


@dataclass(frozen=True, slots=True)
class SelectionIndex:
    """Whether the selection's index exists, is usable and is what the planner reads."""

    exists: bool
    valid: bool
    table: str | None
    definition: str | None
    scan: str  # how the plan reads the slot table: "Index Scan using ix_...", "Seq Scan", ...
    serves_selection: bool


class StatusStore:
    """Read-only queries over the slot table, the quarantine and the server's views."""

    def __init__(self, connection: psycopg.AsyncConnection[Any]) -> None:
        self._conn = connection

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, database_url: str, application_name: str, timeout_seconds: float = 10.0
    ) -> AsyncIterator[Self]:
        """One read-only transaction (one snapshot) whose statements give up after
        `timeout_seconds`; it is rolled back and the connection closed at the end."""
        try:
            conn = await psycopg.AsyncConnection.connect(
                database_url,
                application_name=application_name,
                connect_timeout=max(1, round(timeout_seconds)),
            )
        except psycopg.Error as exc:
            raise StoreConnectError(first_line(exc)) from exc
        try:
            store = cls(conn)
            timeout_ms = str(round(timeout_seconds * 1000))
            await store._rows(
                "status_transaction_limits",
                {"statement_timeout": timeout_ms, "lock_timeout": timeout_ms},
            )
            yield store
        finally:
            with suppress(psycopg.Error):  # a broken connection has nothing to roll back
                await conn.rollback()
            await conn.close()

    async def schema_revision(self) -> str | None:
        """The migration the schema is at; SchemaMissingError when it was never migrated."""
        rows = await self._rows("schema_revision", {})
        return str(rows[0][0]) if rows else None

    async def counts_by_status(self) -> dict[SlotStatus, int]:
        counts = dict.fromkeys(SlotStatus, 0)
        for status, count in await self._rows("status_counts_by_status", {}):
            counts[SlotStatus(status)] = int(count)
        return counts

    async def backlog(self, as_of: datetime, cap: int) -> int:
        """Available slots due at `as_of`, counted up to `cap`."""
        rows = await self._rows("status_backlog_capped", {"as_of": as_of, "cap": cap})
        return int(rows[0][0])

    async def oldest_overdue(self, as_of: datetime) -> OverdueSlot | None:
        rows = await self._rows("status_oldest_overdue", {"as_of": as_of})
        return OverdueSlot(*rows[0]) if rows else None

    async def worker_sessions(self) -> tuple[WorkerSession, ...]:
        rows = await self._rows("status_worker_sessions", {"application_name": APPLICATION_NAME})
        return tuple(WorkerSession(*row) for row in rows)

    async def failed_slots(self, limit: int) -> tuple[int, tuple[FailedSlot, ...]]:
        """How many slots are in quarantine and still Available, and the latest `limit`."""
        total = await self._rows("status_failed_slots_total", {})
        rows = await self._rows("status_failed_slots", {"limit": limit})
        return int(total[0][0]), tuple(FailedSlot(*row) for row in rows)

    async def selection_index(self, as_of: datetime, batch_size: int) -> SelectionIndex:
        found = await self._rows("status_selection_index", {})
        plan_rows = await self._rows(
            "status_explain_selection", {"as_of": as_of, "batch_size": batch_size}
        )
        scan = _slot_table_scan(plan_rows[0][0])
        table, valid, definition = found[0] if found else (None, False, None)
        return SelectionIndex(
            exists=bool(found),
            valid=bool(valid),
            table=table,
            definition=definition,
            scan=scan,
            serves_selection=f"using {SELECTION_INDEX}" in scan,
        )

    async def _rows(self, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        try:
            cursor = await self._conn.execute(query(name), params)
            return await cursor.fetchall()
        except psycopg.Error as exc:
            raise translate(exc) from exc


def _slot_table_scan(explained: Any) -> str:
    """How an EXPLAIN (FORMAT JSON) plan reads the slot table, in EXPLAIN's own words.

    A bitmap scan reads the table in one node and the index in a child node:
    both are named ("Bitmap Heap Scan, Bitmap Index Scan using ix_...").
    """
    try:
        steps = [
            f"{node['Node Type']} using {node['Index Name']}"
            if "Index Name" in node
            else str(node["Node Type"])
            for node in _plan_nodes(explained[0]["Plan"])
            if node.get("Relation Name") == SLOT_TABLE or "Index Name" in node
        ]
    except (KeyError, IndexError, TypeError) as exc:
        raise SlotStoreError(f"unexpected EXPLAIN output: {exc!r}") from exc
    return ", ".join(steps) or f"no scan of {SLOT_TABLE}"


def _plan_nodes(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield node
    for child in node.get("Plans", ()):
        yield from _plan_nodes(child)
