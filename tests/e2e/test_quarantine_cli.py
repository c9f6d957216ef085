"""`slot-expiration quarantine`: see the poison rows, and retry them now once fixed."""

from __future__ import annotations

import json
from uuid import uuid4

import pytest

from slot_expiration.domain import SlotStatus
from tests.e2e.command import run_command
from tests.support.database import SlotDatabase
from tests.support.slots import AS_OF, past_slots

pytestmark = pytest.mark.e2e


async def quarantined_run(db: SlotDatabase, poison_count: int, healthy: int = 2) -> list[str]:
    slots = await db.insert(past_slots(poison_count + healthy))
    poison = slots[:poison_count]
    await db.install_poison_trigger([p.id for p in poison], "23514")
    done = await run_command("once", "--as-of", AS_OF.isoformat(), "--database-url", db.url)
    assert done.returncode == 0, done.describe()
    return [str(p.id) for p in poison]


async def test_list_shows_each_quarantined_slot_with_its_attempts_and_reason(
    db: SlotDatabase,
) -> None:
    poison = await quarantined_run(db, 2)

    done = await run_command("quarantine", "list", "--json", "--database-url", db.url)
    text = await run_command("quarantine", "list", "--database-url", db.url)

    assert done.returncode == 0, done.describe()
    entries = json.loads(done.stdout)
    assert sorted(e["slot_id"] for e in entries) == sorted(poison)
    assert {(e["attempts"], e["sqlstate"]) for e in entries} == {(1, "23514")}
    assert all(e["message"] == "slot refuses to expire" for e in entries)
    assert text.stdout.count("attempts 1") == 2


async def test_a_fixed_slot_retried_now_expires_at_the_next_cycle(db: SlotDatabase) -> None:
    (poison,) = await quarantined_run(db, 1)
    await db.execute("DROP TRIGGER poison ON availability_slots")

    retried = await run_command("quarantine", "retry", poison, "--database-url", db.url)
    again = await run_command(
        "once", "--json", "--as-of", AS_OF.isoformat(), "--database-url", db.url
    )

    assert retried.returncode == 0, retried.describe()
    assert json.loads(again.stdout)["expired_count"] == 1
    assert set((await db.statuses()).values()) == {SlotStatus.EXPIRED}
    assert await db.quarantine() == {}


async def test_retry_all_makes_every_quarantined_slot_due(db: SlotDatabase) -> None:
    await quarantined_run(db, 3)

    done = await run_command("quarantine", "retry", "--all", "--database-url", db.url)

    assert done.returncode == 0, done.describe()
    assert done.stdout.startswith("3 quarantined slot(s) due now")
    entries = await db.quarantine()
    assert all(
        e.next_attempt_at < e.first_failed_at + AS_OF.resolution * 10**9 for e in entries.values()
    )


async def test_retry_of_a_slot_not_in_quarantine_changes_nothing(db: SlotDatabase) -> None:
    (poison,) = await quarantined_run(db, 1)
    before = await db.quarantine()
    stranger = str(uuid4())

    done = await run_command("quarantine", "retry", poison, stranger, "--database-url", db.url)

    assert done.returncode == 1, done.describe()
    assert done.stderr.splitlines() == [
        f"slot-expiration: error: not in the quarantine, nothing changed: {stranger}"
    ]
    assert await db.quarantine() == before


@pytest.mark.parametrize("args", [[], ["--all", str(uuid4())]], ids=["neither", "both"])
async def test_retry_needs_slot_ids_or_all(db: SlotDatabase, args: list[str]) -> None:
    done = await run_command("quarantine", "retry", *args, "--database-url", db.url)

    assert done.returncode == 2, done.describe()
    assert len(done.stderr.splitlines()) == 1
