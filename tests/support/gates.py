"""Deterministic interleavings: gates (advisory locks the test holds) that a trigger makes
one chosen write wait on, and a view of who waits on whom in pg_stat_activity.

This SQL belongs to the tests (fault injection and inspection), not to the product.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from psycopg import sql

from slot_expiration.db import ApplicationName
from slot_expiration.domain import SlotStatus
from tests.support.database import SlotDatabase

SLOTS_APPLICATION = ApplicationName.SLOTS
WORKER_APPLICATION = ApplicationName.WORKER

__all__ = [
    "SLOTS_APPLICATION",
    "WORKER_APPLICATION",
    "Session",
    "TransitionGates",
    "gate_inserts_of",
    "sessions",
]


class TransitionGates:
    """The UPDATE that moves slot S to status T waits while the gate (S, T) is closed.

    The trigger runs before the row is written but after PostgreSQL locked it, so
    a transaction held at a gate holds that row's lock: a worker passes it over,
    a booking waits for it.
    """

    def __init__(self, db: SlotDatabase) -> None:
        self._db = db

    @classmethod
    async def install(cls, db: SlotDatabase) -> TransitionGates:
        await db.execute(
            "CREATE FUNCTION transition_gate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "PERFORM pg_advisory_xact_lock_shared(hashtext(NEW.id::text || '/' || NEW.status)); "
            "RETURN NEW; END $$"
        )
        await db.execute(
            "CREATE TRIGGER transition_gate BEFORE UPDATE ON availability_slots "
            "FOR EACH ROW EXECUTE FUNCTION transition_gate()"
        )
        return cls(db)

    async def close(self, slot_id: UUID, target: SlotStatus) -> None:
        await self._db.execute(
            "SELECT pg_advisory_lock(hashtext(%s || '/' || %s))", str(slot_id), target.value
        )

    async def open(self, slot_id: UUID, target: SlotStatus) -> None:
        await self._db.execute(
            "SELECT pg_advisory_unlock(hashtext(%s || '/' || %s))", str(slot_id), target.value
        )


async def gate_inserts_of(db: SlotDatabase, consultant_id: UUID, key: int) -> None:
    """Every insert of a slot of this consultant waits while advisory lock `key` is held."""
    await db.execute(
        sql.SQL(
            "CREATE FUNCTION insert_gate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.consultant_id = {consultant}::uuid THEN "
            "PERFORM pg_advisory_xact_lock_shared({key}); END IF; RETURN NEW; END $$"
        ).format(consultant=sql.Literal(str(consultant_id)), key=sql.Literal(key))
    )
    await db.execute(
        "CREATE TRIGGER insert_gate BEFORE INSERT ON availability_slots "
        "FOR EACH ROW EXECUTE FUNCTION insert_gate()"
    )


@dataclass(frozen=True, slots=True)
class Session:
    pid: int
    wait_event_type: str | None
    wait_event: str | None
    blocked_by: tuple[int, ...]

    @property
    def at_a_gate(self) -> bool:
        """Waiting on an advisory lock (a gate, or a publication's consultant lock)."""
        return (self.wait_event_type, self.wait_event) == ("Lock", "advisory")

    @property
    def on_a_row(self) -> bool:
        """Waiting for another transaction to end (a row it locked)."""
        return (self.wait_event_type, self.wait_event) == ("Lock", "transactionid")


async def sessions(db: SlotDatabase, application_name: str) -> list[Session]:
    """The sessions of this application on the test's database, with who blocks them."""
    cursor = await db.conn.execute(
        "SELECT pid, wait_event_type, wait_event, pg_blocking_pids(pid) FROM pg_stat_activity "
        "WHERE application_name = %s AND datname = current_database() ORDER BY pid",
        [application_name],
    )
    return [Session(r[0], r[1], r[2], tuple(r[3])) for r in await cursor.fetchall()]
