"""Rolling deploys as docs/deploy.md tells them: a new release's `run` on a schema its
release has not migrated yet (never migrated, or a migration behind) stays up and unready
(/readyz 503, "run migrate"), checks at every tick, and becomes ready by itself once the
migration Job has run; no restart, no crash loop."""

from __future__ import annotations

import signal

import pytest

from slot_expiration.domain import SlotStatus
from slot_expiration.schema.migrate import downgrade, head_revision
from tests.e2e.command import Running, run_command, started
from tests.e2e.endpoint import endpoint_url, get_json
from tests.support.database import SlotDatabase
from tests.support.slots import past_slots

pytestmark = pytest.mark.e2e

FAST = ("--interval-seconds", "1")


async def _ready_after_migrate(worker: Running, url: str, database_url: str) -> dict[str, object]:
    """/readyz while unready; migrate; then /readyz again once the worker says ready."""
    await worker.until(lambda: worker.logged("cycle.failed"), "a tick on the old schema")
    status, unready = await get_json(f"{url}/readyz")
    assert (status, unready["ready"]) == (503, False), unready
    migrated = await run_command("migrate", "--database-url", database_url)
    assert migrated.returncode == 0, migrated.describe()

    async def ready() -> bool:
        return (await get_json(f"{url}/readyz"))[0] == 200

    await worker.until(ready, "ready once migrated")
    return unready


async def test_run_on_a_database_never_migrated_waits_unready_and_is_ready_once_migrated(
    empty_database_url: str,
) -> None:
    async with started("run", *FAST, "--database-url", empty_database_url) as worker:
        url = await endpoint_url(worker)
        unready = await _ready_after_migrate(worker, url, empty_database_url)
        await worker.until(lambda: worker.logged("cycle.completed"), "a cycle once migrated")
        worker.send_signal(signal.SIGTERM)
        done = await worker.wait()

    assert done.returncode == 0, done.describe()
    assert "run `slot-expiration migrate`" in str(unready["detail"])
    (behind,) = [e for e in done.log_events() if e["event"] == "schema.behind"]
    assert behind["level"] == "warning"
    assert "not ready until then, checked at every tick" in behind["detail"]


async def test_run_on_a_schema_a_migration_behind_waits_unready_then_expires(
    db: SlotDatabase,
) -> None:
    downgrade(db.url, "0005")  # as before this release's migration Job ran
    await db.insert(past_slots(3))

    async with started("run", *FAST, "--database-url", db.url) as worker:
        url = await endpoint_url(worker)
        unready = await _ready_after_migrate(worker, url, db.url)
        await worker.until(lambda: worker.logged("cycle.completed"), "a cycle once migrated")
        _, ready = await get_json(f"{url}/readyz")
        worker.send_signal(signal.SIGTERM)
        done = await worker.wait()

    assert done.returncode == 0, done.describe()
    assert "run `slot-expiration migrate`" in str(unready["detail"])
    assert ready["schema_revision"] == head_revision()
    assert set((await db.statuses()).values()) == {SlotStatus.EXPIRED}


async def test_run_still_refuses_to_start_on_what_migrate_cannot_fix(db: SlotDatabase) -> None:
    await db.execute("ALTER TABLE availability_slots DROP COLUMN version")

    done = await run_command("run", *FAST, "--database-url", db.url)

    assert done.returncode == 1, done.describe()
    assert "restore it, migrate cannot" in done.stderr.splitlines()[-1]
