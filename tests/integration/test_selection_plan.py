"""The selection is served by ix_availability_slots_status_start on a realistic table."""

from __future__ import annotations

import pytest
from psycopg import sql

from slot_expiration.db.statements import query
from slot_expiration.expiry.store import Selection
from tests.support.database import SlotDatabase
from tests.support.slots import AS_OF

pytestmark = pytest.mark.integration

# A calendar in steady state: most rows are history (Expired, Booked, Archived)
# or future Available slots; the job's candidates are a thin slice.
FILL = """
INSERT INTO availability_slots
SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(),
       %(as_of)s + (i - 150000) * interval '1 minute',
       %(as_of)s + (i - 150000) * interval '1 minute' + interval '30 minutes',
       CASE WHEN i > 150000 THEN 'Available'
            WHEN i > 149500 THEN 'Available'
            ELSE (ARRAY['Expired', 'Booked', 'Archived'])[1 + i %% 3] END,
       1, %(as_of)s, %(as_of)s
FROM generate_series(1, 200000) AS i
"""


@pytest.mark.parametrize("statement", ["expire_batch", "lock_batch"])
async def test_selection_uses_the_status_start_index(db: SlotDatabase, statement: str) -> None:
    await db.conn.execute(FILL, {"as_of": AS_OF})
    await db.execute("ANALYZE availability_slots")

    explain = sql.SQL("EXPLAIN ") + sql.SQL(query(statement))
    params = Selection(AS_OF, AS_OF, 500).parameters()
    cursor = await db.conn.execute(explain, params)
    plan = "\n".join(row[0] for row in await cursor.fetchall())

    assert "ix_availability_slots_status_start" in plan, plan
    assert "Seq Scan on availability_slots" not in plan, plan
