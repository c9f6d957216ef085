"""The quarantine's statements read availability_slots by key whatever the planner believes of
the quarantine, and what they store and show of a database's message is bounded."""

from __future__ import annotations

from datetime import timedelta

import pytest
from psycopg import sql

from slot_expiration.db.statements import query
from slot_expiration.domain.text import MAX_MESSAGE_CHARS
from slot_expiration.quarantine import QuarantineEntry, QuarantineStore
from slot_expiration.status.store import StatusStore
from tests.support.database import LIMITS, SlotDatabase
from tests.support.slots import AS_OF, past_slots

pytestmark = pytest.mark.integration

# A calendar of 200,000 slots, analyzed: what the planner knows of the slot table.
FILL = """
INSERT INTO availability_slots
SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(),
       %(as_of)s + (i - 100000) * interval '1 minute',
       %(as_of)s + (i - 100000) * interval '1 minute' + interval '30 minutes',
       (ARRAY['Available', 'Expired', 'Booked', 'Archived'])[1 + i %% 4],
       1, %(as_of)s, %(as_of)s
FROM generate_series(1, 200000) AS i
"""
# Test-side SQL: quarantine entries for `count` slots, some Available, some not (their entries
# end at the next clean-up), written straight into the table.
QUARANTINE = """
INSERT INTO slot_expiration_failures
    (slot_id, attempts, first_failed_at, last_failed_at, next_attempt_at, sqlstate, message)
SELECT id, 1, %(as_of)s, %(as_of)s, %(as_of)s + interval '5 minutes', 'P0001', 'refused'
FROM availability_slots
ORDER BY start_at
LIMIT %(count)s
"""
# The statements of quarantine.sql that read availability_slots beside the quarantine: the
# clean-up each cycle runs first, and what the worker's gauges, `status`, the page and
# `quarantine list` read.
CLEAN_UP = ("end_departed_entries", "forget_deleted_slots")
READERS = ("quarantine_list", "quarantine_total", "quarantine_ended", "measure_quarantine")
PARAMS = {
    "now": AS_OF,
    "limit": 100,
    "message_chars": MAX_MESSAGE_CHARS,
    "sqlstate": None,
    "tenant_id": None,
}


async def _scans_of_the_slot_table(db: SlotDatabase, statements: tuple[str, ...]) -> list[str]:
    """The plans among `statements`' that read the whole of availability_slots."""
    scanned = []
    for statement in statements:
        explain = sql.SQL("EXPLAIN ") + sql.SQL(query(statement))
        cursor = await db.conn.execute(explain, PARAMS)
        plan = "\n".join(row[0] for row in await cursor.fetchall())
        if "Seq Scan on availability_slots" in plan:
            scanned.append(f"{statement}:\n{plan}")
    return scanned


async def _plans_whatever_the_statistics(
    db: SlotDatabase, statements: tuple[str, ...]
) -> dict[str, list[str]]:
    """The scans of the slot table in `statements`' plans on a calendar of 200,000 slots,
    first with a quarantine never analyzed (the planner guesses its rows from its pages:
    here those of 20,000 entries since purged; autovacuum off so that nothing analyzes it
    meanwhile), then analyzed while it held 20,000 entries."""
    await db.conn.execute(FILL, {"as_of": AS_OF})
    await db.execute("ANALYZE availability_slots")
    await db.execute("ALTER TABLE slot_expiration_failures SET (autovacuum_enabled = false)")
    await db.conn.execute(QUARANTINE, {"as_of": AS_OF, "count": 20_000})
    await db.execute(
        "DELETE FROM slot_expiration_failures WHERE slot_id NOT IN "
        "(SELECT slot_id FROM slot_expiration_failures LIMIT 5)"
    )
    never_analyzed = await _scans_of_the_slot_table(db, statements)
    await db.execute("DELETE FROM slot_expiration_failures")
    await db.conn.execute(QUARANTINE, {"as_of": AS_OF, "count": 20_000})
    await db.execute("ANALYZE slot_expiration_failures")
    analyzed_large = await _scans_of_the_slot_table(db, statements)
    return {"never analyzed": never_analyzed, "analyzed large": analyzed_large}


async def test_the_clean_up_of_each_cycle_reads_the_slot_table_by_key_whatever_the_statistics(
    db: SlotDatabase,
) -> None:
    scans = await _plans_whatever_the_statistics(db, CLEAN_UP)

    assert scans == {"never analyzed": [], "analyzed large": []}, scans


async def test_the_quarantines_views_read_the_slot_table_by_key_whatever_the_statistics(
    db: SlotDatabase,
) -> None:
    scans = await _plans_whatever_the_statistics(db, READERS)

    assert scans == {"never analyzed": [], "analyzed large": []}, scans


async def test_a_long_rejection_message_is_stored_bounded_its_length_noted(
    db: SlotDatabase,
) -> None:
    (slot,) = await db.insert(past_slots(1))
    message = "new row violates a check: " + "x" * 217_000
    entry = QuarantineEntry(slot.id, 1, AS_OF + timedelta(minutes=5), "23514", message)

    async with QuarantineStore.connect(db.url, LIMITS) as store:
        await store.record([entry], AS_OF)

    stored = (await db.quarantine())[slot.id]
    assert len(stored.message) == MAX_MESSAGE_CHARS
    assert stored.message.startswith("new row violates a check: xxx")
    assert stored.message.endswith(f"… ({len(message)} characters)")


async def test_a_long_message_stored_before_the_bound_is_listed_bounded(db: SlotDatabase) -> None:
    slots = await db.insert(past_slots(2))
    await db.conn.execute(QUARANTINE, {"as_of": AS_OF, "count": 2})
    await db.conn.execute(
        "UPDATE slot_expiration_failures SET message = %s, ended_at = "
        "CASE WHEN slot_id = %s THEN %s::timestamptz END, "
        "ended_status = CASE WHEN slot_id = %s THEN 'Expired' END",
        ("y" * 217_000, slots[1].id, AS_OF, slots[1].id),
    )

    async with StatusStore.connect(db.url, "slot-expiration-status") as status:
        listing = await QuarantineStore(status.session).listing(10)
        ended = await QuarantineStore(status.session).ended(10)

    (listed,) = listing.latest
    (gone,) = ended
    for shown in (listed.message, gone.message):
        assert len(shown) == MAX_MESSAGE_CHARS
        assert shown.endswith("… (217000 characters)")
