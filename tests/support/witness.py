"""Which transaction expired which row, as the database saw it.

The worker's batch statement returns counts, not rows: the calendar's table is
what says which slots a cycle expired. A test that asserts *which* rows, in
*which* batch, installs this witness on its own database: an AFTER UPDATE
trigger that writes each Available -> Expired transition with the id of the
top-level transaction that made it (`pg_current_xact_id()`: the same inside the
row-by-row path's savepoints), in the order the rows changed. SECURITY DEFINER,
so a worker role without rights on the witness's table is still witnessed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from uuid import UUID

import psycopg

from slot_expiration.domain import SlotRef

INSTALL = """
CREATE SCHEMA IF NOT EXISTS test_witness;
CREATE TABLE IF NOT EXISTS test_witness.expiries (
    seq bigserial PRIMARY KEY,
    xid xid8 NOT NULL,
    pid integer NOT NULL,
    slot_id uuid NOT NULL,
    tenant_id uuid NOT NULL,
    start_at timestamptz NOT NULL
);
CREATE OR REPLACE FUNCTION test_witness.witness_expiry() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    INSERT INTO test_witness.expiries (xid, pid, slot_id, tenant_id, start_at)
    VALUES (pg_current_xact_id(), pg_backend_pid(), NEW.id, NEW.tenant_id, NEW.start_at);
    RETURN NULL;
END $$;
CREATE TRIGGER test_witness_expiry AFTER UPDATE ON availability_slots
FOR EACH ROW WHEN (OLD.status = 'Available' AND NEW.status = 'Expired')
EXECUTE FUNCTION test_witness.witness_expiry();
"""
INSTALLED = "SELECT FROM pg_trigger WHERE tgname = 'test_witness_expiry'"
SINCE = """
SELECT xid::text::bigint AS xid, pid, slot_id, tenant_id
FROM test_witness.expiries WHERE seq > %s
ORDER BY xid::text::bigint, start_at, slot_id
"""


@dataclass(slots=True)
class Witness:
    """The expiries committed since `after` (the witness's last entry when it started)."""

    url: str
    after: int = 0
    batches: list[list[SlotRef]] = field(default_factory=list)
    # The rows each session expired (a worker's cycle runs on a session of its own).
    by_session: dict[int, list[SlotRef]] = field(default_factory=dict)

    @property
    def expired(self) -> list[SlotRef]:
        """Every row expired, batch after batch, each batch oldest first."""
        return [slot for batch in self.batches for slot in batch]

    async def read(self) -> list[list[SlotRef]]:
        """The committed expiries since the start, by transaction in the order they began."""
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            rows = await (await conn.execute(SINCE, (self.after,))).fetchall()
        grouped: dict[int, list[SlotRef]] = {}
        self.by_session = {}
        for xid, pid, slot_id, tenant_id in rows:
            slot = SlotRef(id=UUID(str(slot_id)), tenant_id=tenant_id)
            grouped.setdefault(xid, []).append(slot)
            self.by_session.setdefault(pid, []).append(slot)
        self.batches = list(grouped.values())
        return self.batches


async def install_witness(url: str) -> int:
    """Install the witness unless it is there (its DDL would wait for a cycle's locks);
    returns its last entry so far."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        async with conn.transaction():  # cycles started together install it once
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('test_witness'))")
            if await (await conn.execute(INSTALLED)).fetchone() is None:
                await conn.execute(INSTALL)
        row = await (await conn.execute("SELECT max(seq) FROM test_witness.expiries")).fetchone()
    return int(row[0] or 0) if row else 0


@asynccontextmanager
async def witnessed(url: str) -> AsyncIterator[Witness]:
    """The expiries committed inside the block, read when it ends."""
    witness = Witness(url, await install_witness(url))
    yield witness
    await witness.read()
