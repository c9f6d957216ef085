"""A schema ahead of this release (a newer release migrated it first: a rolling deploy,
a rollback): `once`, `run` and /readyz keep working and say so; `status` says so too.
Simulated by a history table holding a later revision than this release knows."""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime, timedelta

import pytest

from slot_expiration.domain import SlotStatus
from slot_expiration.schema.migrate import head_revision
from tests.e2e.command import run_command, started
from tests.e2e.endpoint import endpoint_url, get_json
from tests.support.database import SlotDatabase
from tests.support.slots import make_slot

pytestmark = pytest.mark.e2e

LATER = "0099"
FAST = ("--interval-seconds", "1")


@pytest.fixture
async def ahead(db: SlotDatabase) -> SlotDatabase:
    await db.execute("UPDATE slot_expiration_alembic_version SET version_num = %s", LATER)
    return db


def _said_ahead() -> str:
    return f"schema ahead of this release ({LATER} > {head_revision()})"


async def test_once_expires_on_a_schema_ahead_and_logs_that_it_is(
    ahead: SlotDatabase, secret_url: str
) -> None:
    now = datetime.now(UTC)
    await ahead.insert([make_slot(timedelta(minutes=-m), as_of=now) for m in (1, 2, 3)])

    done = await run_command("once", "--json", "--database-url", secret_url)

    assert done.returncode == 0, done.describe()
    assert json.loads(done.stdout)["expired_count"] == 3
    (event,) = [e for e in done.log_events() if e["event"] == "schema.ahead"]
    assert (event["schema_revision"], event["latest_revision"]) == (LATER, head_revision())
    assert event["detail"].startswith(_said_ahead())


async def test_run_is_ready_on_a_schema_ahead_and_says_why(
    ahead: SlotDatabase, secret_url: str
) -> None:
    now = datetime.now(UTC)
    await ahead.insert([make_slot(timedelta(minutes=-1), as_of=now)])

    async with started("run", *FAST, "--database-url", secret_url) as worker:
        url = await endpoint_url(worker)
        await worker.until(lambda: worker.logged("cycle.completed"), "a cycle completed")
        status, body = await get_json(f"{url}/readyz")
        worker.send_signal(signal.SIGTERM)
        done = await worker.wait()

    assert done.returncode == 0, done.describe()
    assert status == 200
    assert body["ready"] is True
    assert (body["schema_revision"], body["latest_revision"]) == (LATER, head_revision())
    assert _said_ahead() in body["detail"]
    assert "schema.ahead" in done.stderr
    assert set((await ahead.statuses()).values()) == {SlotStatus.EXPIRED}


async def test_status_says_the_schema_is_ahead_of_this_release(
    ahead: SlotDatabase, secret_url: str
) -> None:
    text = await run_command("status", "--database-url", secret_url)
    document = await run_command("status", "--json", "--database-url", secret_url)

    assert text.returncode == document.returncode == 0, text.describe() + document.describe()
    (schema_line,) = [line for line in text.stdout.splitlines() if line.startswith("schema")]
    assert f"{LATER}: {_said_ahead()}; migrations only add" in schema_line
    schema = json.loads(document.stdout)["schema"]
    assert (schema["revision"], schema["ahead"], schema["up_to_date"]) == (LATER, True, False)


async def test_check_on_a_schema_ahead_warns_with_advice_that_is_true(
    ahead: SlotDatabase, secret_url: str
) -> None:
    """A rollback: the newer release's migration stays (migrations only add), and this one's
    `migrate` has nothing to do: "run migrate" would page with advice that does nothing."""
    once = await run_command("once", "--database-url", secret_url)
    migrate = await run_command("migrate", "--database-url", secret_url)

    done = await run_command("status", "--check", "--database-url", secret_url)

    assert (once.returncode, migrate.returncode) == (0, 0), once.describe() + migrate.describe()
    assert done.returncode == 1, done.describe()
    assert done.stdout == (
        f"WARNING: {_said_ahead()}: a newer release migrated this database; roll forward, or "
        "keep this release: it works on the newer schema (migrations only add)\n"
    )
