"""`slot-expiration quarantine`: see the poison rows, and retry them now once fixed."""

from __future__ import annotations

import json
from uuid import UUID, uuid4

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
    assert text.stdout.startswith("2 slots in quarantine, still Available (the latest 2 below)")
    assert text.stdout.count("  1 attempt  next ") == 2


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
    assert done.stdout.startswith("3 quarantined slots due now")
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


async def test_a_parked_slot_is_listed_as_parked_and_left_out_of_retry_all(
    db: SlotDatabase,
) -> None:
    parked, other = await quarantined_run(db, 2)

    done = await run_command("quarantine", "park", parked, "--database-url", db.url)
    listed = await run_command("quarantine", "list", "--database-url", db.url)
    retried = await run_command("quarantine", "retry", "--all", "--database-url", db.url)
    unparked = await run_command("quarantine", "retry", parked, "--database-url", db.url)

    assert done.returncode == 0, done.describe()
    assert done.stdout.startswith("1 quarantined slot parked: not retried until")
    assert "2 slots in quarantine, still Available, 1 of them parked" in listed.stdout
    (line,) = [line for line in listed.stdout.splitlines() if line.startswith(parked)]
    assert "  parked since " in line
    assert retried.stdout.startswith("1 quarantined slot due now")
    assert unparked.returncode == 0, unparked.describe()
    after = await run_command("quarantine", "list", "--json", "--database-url", db.url)
    assert {e["slot_id"]: e["parked_at"] for e in json.loads(after.stdout)} == {
        parked: None,
        other: None,
    }


async def test_parking_a_slot_not_in_quarantine_is_one_line_exit_1(db: SlotDatabase) -> None:
    stranger = str(uuid4())

    done = await run_command("quarantine", "park", stranger, "--database-url", db.url)

    assert done.returncode == 1, done.describe()
    assert done.stderr.splitlines() == [
        f"slot-expiration: error: not in the quarantine, nothing changed: {stranger}"
    ]


async def test_list_filters_by_sqlstate_and_tenant(db: SlotDatabase) -> None:
    slots = await db.insert(past_slots(3))
    await db.install_poison_trigger([slots[0].id, slots[1].id], "23514")
    done = await run_command("once", "--as-of", AS_OF.isoformat(), "--database-url", db.url)
    assert done.returncode == 0, done.describe()

    by_state = await run_command(
        "quarantine", "list", "--json", "--sqlstate", "23514", "--database-url", db.url
    )
    other_state = await run_command(
        "quarantine", "list", "--json", "--sqlstate", "p0001", "--database-url", db.url
    )
    by_tenant = await run_command(
        "quarantine",
        "list",
        "--json",
        "--tenant",
        str(slots[1].tenant_id),
        "--database-url",
        db.url,
    )

    assert len(json.loads(by_state.stdout)) == 2
    assert json.loads(other_state.stdout) == []
    assert [e["slot_id"] for e in json.loads(by_tenant.stdout)] == [str(slots[1].id)]


async def test_a_malformed_sqlstate_filter_is_a_usage_error(db: SlotDatabase) -> None:
    done = await run_command("quarantine", "list", "--sqlstate", "bad!", "--database-url", db.url)

    assert done.returncode == 2, done.describe()
    assert len(done.stderr.splitlines()) == 1
    assert "--sqlstate" in done.stderr


async def test_list_history_shows_how_each_entry_ended(db: SlotDatabase) -> None:
    fixed, archived = await quarantined_run(db, 2)
    await db.execute("DROP TRIGGER poison ON availability_slots")
    await db.execute(
        "UPDATE availability_slots SET status = 'Archived', version = version + 1 WHERE id = %s",
        UUID(archived),
    )
    await run_command("quarantine", "retry", fixed, "--database-url", db.url)
    again = await run_command("once", "--as-of", AS_OF.isoformat(), "--database-url", db.url)
    assert again.returncode == 0, again.describe()

    text = await run_command("quarantine", "list", "--history", "--database-url", db.url)
    done = await run_command("quarantine", "list", "--history", "--json", "--database-url", db.url)
    active = await run_command("quarantine", "list", "--json", "--database-url", db.url)

    ended = {e["slot_id"]: e for e in json.loads(done.stdout)}
    assert (ended[fixed]["ended_how"], ended[fixed]["ended_status"]) == ("expired", "Expired")
    assert (ended[archived]["ended_how"], ended[archived]["ended_status"]) == (
        "left_available",
        "Archived",
    )
    assert text.stdout.startswith("2 entries ended, the latest first")
    assert "left Available: Archived" in text.stdout
    assert json.loads(active.stdout) == []
