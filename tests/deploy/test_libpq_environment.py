"""The deploy kit's way to reach the database: SLOT_EXPIRATION_DATABASE_URL=postgresql:// and
libpq's own variables (PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD or PGPASSFILE), so that
no password is ever written into a URL. Checked on the suite's server with a role that must
log in with its password (SCRAM over TCP): a wrong PGPASSWORD is refused."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from slot_expiration.domain import SlotStatus
from tests.e2e.command import run_command, started
from tests.e2e.endpoint import endpoint_url, get_json
from tests.support.database import SlotDatabase
from tests.support.roles import PasswordRole
from tests.support.slots import AS_OF, past_slots

pytestmark = [pytest.mark.deploy, pytest.mark.e2e]


def _libpq(url: str, **extra: str) -> dict[str, str]:
    """The variables the deploy kit sets, for the database of `url`; no password in the URL."""
    parts = urlsplit(url)
    return {
        "SLOT_EXPIRATION_DATABASE_URL": "postgresql://",
        "PGHOST": str(parts.hostname),
        "PGPORT": str(parts.port),
        "PGDATABASE": parts.path.lstrip("/"),
        "PGUSER": str(parts.username),
        **extra,
    }


async def test_migrate_grant_and_once_take_the_database_from_libpq_variables(
    empty_database_url: str, role: PasswordRole
) -> None:
    owner = _libpq(empty_database_url)
    worker = _libpq(empty_database_url, PGUSER=role.name, PGPASSWORD=role.password)

    migrated = await run_command("migrate", env=owner)
    granted = await run_command("grant", "--role", role.name, env=owner)
    async with SlotDatabase.open(empty_database_url) as db:
        slots = await db.insert(past_slots(4))
        once = await run_command("once", "--json", "--as-of", AS_OF.isoformat(), env=worker)
        statuses = set((await db.statuses()).values())

    assert migrated.returncode == 0, migrated.describe()
    assert granted.returncode == 0, granted.describe()
    assert once.returncode == 0, once.describe()
    assert json.loads(once.stdout)["expired_count"] == len(slots)
    assert statuses == {SlotStatus.EXPIRED}
    assert role.password not in once.stdout + once.stderr


async def test_a_wrong_pgpassword_is_refused_in_one_line_without_the_password(
    database_url: str, role: PasswordRole
) -> None:
    wrong = "not-" + role.password

    done = await run_command("once", env=_libpq(database_url, PGUSER=role.name, PGPASSWORD=wrong))

    assert done.returncode == 1, done.describe()
    assert "password authentication failed" in done.stderr
    assert wrong not in done.stdout + done.stderr


async def test_a_passfile_serves_as_well_as_pgpassword(
    database_url: str, role: PasswordRole, tmp_path: Path
) -> None:
    await run_command("grant", "--role", role.name, env=_libpq(database_url))
    parts = urlsplit(database_url)
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"{parts.hostname}:{parts.port}:*:{role.name}:{role.password}\n")
    passfile.chmod(0o600)  # libpq ignores a passfile others may read

    done = await run_command(
        "once", env=_libpq(database_url, PGUSER=role.name, PGPASSFILE=str(passfile))
    )

    assert done.returncode == 0, done.describe()


async def test_run_is_ready_and_stops_cleanly_with_libpq_variables(
    database_url: str, role: PasswordRole
) -> None:
    await run_command("grant", "--role", role.name, env=_libpq(database_url))
    env = _libpq(database_url, PGUSER=role.name, PGPASSWORD=role.password)

    async with started("run", "--interval-seconds", "3600", env=env) as worker:
        base = await endpoint_url(worker)
        await worker.until(lambda: worker.logged("cycle.completed"), "a cycle completed")
        status, readiness = await get_json(f"{base}/readyz")
        worker.send_signal(signal.SIGTERM)
        done = await worker.wait()

    assert (status, readiness["ready"]) == (200, True), readiness
    assert done.returncode == 0, done.describe()
