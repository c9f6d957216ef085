"""Test-side access to a test database: seeding, inspecting, locking, triggers.

This SQL belongs to the tests (inspection and fault injection); the product's
own statements live in slot_expiration/expiry/expiry.sql.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Self
from uuid import UUID

import psycopg
from psycopg import sql

from slot_expiration.db import TransactionLimits
from slot_expiration.domain import Slot, SlotStatus

LIMITS = TransactionLimits(
    statement_timeout_ms=60_000, lock_timeout_ms=2_000, idle_in_transaction_timeout_ms=60_000
)
GATE_KEY = 4242
INSERT_SLOT = """
INSERT INTO availability_slots
    (id, tenant_id, consultant_id, start_at, end_at, status, version, created_at, updated_at)
VALUES
    (%(id)s, %(tenant_id)s, %(consultant_id)s, %(start_at)s, %(end_at)s, %(status)s,
     %(version)s, %(created_at)s, %(updated_at)s)
"""


@dataclass(frozen=True, slots=True)
class Row:
    id: UUID
    status: SlotStatus
    version: int
    updated_at: datetime
    xmin: int


@dataclass(frozen=True, slots=True)
class Quarantined:
    attempts: int
    first_failed_at: datetime
    last_failed_at: datetime
    next_attempt_at: datetime
    sqlstate: str
    message: str


class SlotDatabase:
    """An autocommit connection for arranging and asserting, beside the worker's own."""

    def __init__(self, url: str, conn: psycopg.AsyncConnection[Any]) -> None:
        self.url = url
        self.conn = conn

    @classmethod
    @asynccontextmanager
    async def open(cls, url: str) -> AsyncIterator[Self]:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            yield cls(url, conn)

    async def insert(self, slots: Iterable[Slot]) -> list[Slot]:
        slots = list(slots)
        params = [asdict(slot) | {"status": slot.status.value} for slot in slots]
        async with self.conn.cursor() as cursor:
            await cursor.executemany(INSERT_SLOT, params)
        return slots

    async def rows(self) -> dict[UUID, Row]:
        cursor = await self.conn.execute(
            "SELECT id, status, version, updated_at, xmin::text::bigint FROM availability_slots"
        )
        return {
            r[0]: Row(r[0], SlotStatus(r[1]), r[2], r[3], r[4]) for r in await cursor.fetchall()
        }

    async def quarantine(self) -> dict[UUID, Quarantined]:
        """The entries in quarantine now (not those that ended)."""
        cursor = await self.conn.execute(
            "SELECT slot_id, attempts, first_failed_at, last_failed_at, next_attempt_at, "
            "sqlstate, message FROM slot_expiration_failures WHERE ended_at IS NULL"
        )
        return {r[0]: Quarantined(*r[1:]) for r in await cursor.fetchall()}

    async def ended_quarantine(self) -> dict[UUID, tuple[datetime, str]]:
        """The entries that ended: when, and the status their slot left for."""
        cursor = await self.conn.execute(
            "SELECT slot_id, ended_at, ended_status FROM slot_expiration_failures "
            "WHERE ended_at IS NOT NULL"
        )
        return {r[0]: (r[1], r[2]) for r in await cursor.fetchall()}

    async def statuses(self) -> dict[UUID, SlotStatus]:
        return {slot_id: row.status for slot_id, row in (await self.rows()).items()}

    async def worker_locks(self) -> int:
        """Row and transaction locks held by any slot-expiration session."""
        cursor = await self.conn.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
            "WHERE a.application_name = 'slot-expiration' AND l.locktype <> 'virtualxid'"
        )
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0])

    async def worker_sessions(self, waiting_on_gate: bool = False) -> int:
        query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'slot-expiration'"
        if waiting_on_gate:
            query += " AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
        cursor = await self.conn.execute(query)
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0])

    async def execute(self, statement: sql.Composable | str, *params: Any) -> None:
        await self.conn.execute(statement, params or None)  # type: ignore[arg-type]

    async def install_poison_trigger(self, slot_ids: Sequence[UUID], sqlstate: str) -> None:
        """Make the database reject the expiry of these rows with `sqlstate`."""
        ids = sql.Literal([str(i) for i in slot_ids])
        await self.conn.execute(
            sql.SQL(
                "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.id::text = ANY ({ids}::text[]) THEN "
                "RAISE EXCEPTION 'slot refuses to expire' USING ERRCODE = {code}; END IF; "
                "RETURN NEW; END $$"
            ).format(ids=ids, code=sql.Literal(sqlstate))
        )
        await self.conn.execute(
            "CREATE TRIGGER poison BEFORE UPDATE ON availability_slots "
            "FOR EACH ROW EXECUTE FUNCTION poison()"
        )

    async def install_gate_trigger(self) -> None:
        """Every UPDATE of a slot waits until the gate (an advisory lock) opens."""
        await self.conn.execute(
            "CREATE FUNCTION wait_for_gate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"PERFORM pg_advisory_xact_lock_shared({GATE_KEY}); RETURN NEW; END $$"
        )
        await self.conn.execute(
            "CREATE TRIGGER wait_for_gate BEFORE UPDATE ON availability_slots "
            "FOR EACH ROW EXECUTE FUNCTION wait_for_gate()"
        )

    async def install_gate_for(self, slot_ids: Sequence[UUID]) -> None:
        """Only the UPDATE of these slots waits until the gate opens."""
        ids = sql.Literal([str(i) for i in slot_ids])
        await self.conn.execute(
            sql.SQL(
                "CREATE FUNCTION wait_for_gate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.id::text = ANY ({ids}::text[]) THEN "
                "PERFORM pg_advisory_xact_lock_shared({key}); END IF; RETURN NEW; END $$"
            ).format(ids=ids, key=sql.Literal(GATE_KEY))
        )
        await self.conn.execute(
            "CREATE TRIGGER wait_for_gate BEFORE UPDATE ON availability_slots "
            "FOR EACH ROW EXECUTE FUNCTION wait_for_gate()"
        )

    async def close_gate(self) -> None:
        await self.conn.execute(f"SELECT pg_advisory_lock({GATE_KEY})")

    async def open_gate(self) -> None:
        await self.conn.execute(f"SELECT pg_advisory_unlock({GATE_KEY})")

    async def install_spin_gate(self) -> None:
        """Every UPDATE of a slot spins (pg_sleep) until the spin gate opens: a wait inside
        the statement that no lock_timeout ends, only a cancel, the statement's own limit,
        or the server finding its client gone."""
        await self.conn.execute("CREATE TABLE spin_gate_open (open boolean)")
        await self.conn.execute(
            "CREATE FUNCTION spin_gate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "WHILE NOT EXISTS (SELECT FROM spin_gate_open) LOOP PERFORM pg_sleep(0.01); "
            "END LOOP; RETURN NEW; END $$"
        )
        await self.conn.execute(
            "CREATE TRIGGER spin_gate BEFORE UPDATE ON availability_slots "
            "FOR EACH ROW EXECUTE FUNCTION spin_gate()"
        )

    async def open_spin_gate(self) -> None:
        await self.conn.execute("INSERT INTO spin_gate_open VALUES (true)")

    async def worker_spinning(self) -> bool:
        """Whether a worker's batch statement spins at the spin gate."""
        cursor = await self.conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'slot-expiration' "
            "AND state = 'active' AND query LIKE '%%SKIP LOCKED%%'"
        )
        return await cursor.fetchone() == (1,)


@asynccontextmanager
async def rows_locked(url: str, slot_ids: Sequence[UUID]) -> AsyncIterator[None]:
    """Hold FOR UPDATE locks on these rows from another transaction, as book-slot would."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute(
            "SELECT id FROM availability_slots WHERE id = ANY(%s) FOR UPDATE", [list(slot_ids)]
        )
        yield
        await conn.rollback()


async def install_deferred_trigger(db: SlotDatabase, body: str) -> None:
    """A constraint trigger that runs `body` (PL/pgSQL) at COMMIT, for each expired row."""
    await db.execute(
        "CREATE FUNCTION at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        + body
        + " RETURN NEW; END $$"
    )
    await db.execute(
        "CREATE CONSTRAINT TRIGGER at_commit AFTER UPDATE ON availability_slots "
        "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION at_commit()"
    )
