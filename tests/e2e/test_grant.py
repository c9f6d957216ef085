"""`slot-expiration grant`: the owner gives the worker's role exactly what it needs; the
worker then runs as that role, with a password, over TCP."""

from __future__ import annotations

import json
import signal

import pytest
from psycopg import sql

from slot_expiration.domain import SlotStatus
from tests.e2e.command import event_names, run_command, started
from tests.support.database import SlotDatabase
from tests.support.roles import PasswordRole
from tests.support.slots import AS_OF, past_slots

pytestmark = pytest.mark.e2e


async def test_the_owner_grants_and_the_worker_runs_as_the_least_privileged_role(
    db: SlotDatabase, role: PasswordRole
) -> None:
    slots = await db.insert(past_slots(7))
    worker_url = role.url_for(db.url)

    granted = await run_command("grant", "--role", role.name, "--database-url", db.url)
    once = await run_command(
        "once", "--json", "--as-of", AS_OF.isoformat(), "--database-url", worker_url
    )

    assert granted.returncode == 0, granted.describe()
    expected = (
        f'GRANT UPDATE ("status", "updated_at", "version") ON TABLE "availability_slots" '
        f'TO "{role.name}";'
    )
    assert expected in granted.stdout
    assert once.returncode == 0, once.describe()
    assert json.loads(once.stdout)["expired_count"] == len(slots)
    assert role.password not in once.stdout + once.stderr
    assert set((await db.statuses()).values()) == {SlotStatus.EXPIRED}


async def test_run_as_the_role_polls_and_stops_cleanly(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await db.insert(past_slots(3))
    await run_command("grant", "--role", role.name, "--database-url", db.url)

    async def drained() -> bool:
        return set((await db.statuses()).values()) == {SlotStatus.EXPIRED}

    async with started(
        "run", "--interval-seconds", "3600", "--database-url", role.url_for(db.url)
    ) as worker:
        await worker.until(drained, "the backlog expired by the role")
        await worker.until(lambda: worker.logged("cycle.completed"), "the cycle logged")
        worker.send_signal(signal.SIGTERM)
        done = await worker.wait()

    assert done.returncode == 0, done.describe()
    assert "worker.stopped" in event_names(done.log_events())


async def test_grant_dry_run_prints_the_statements_and_changes_nothing(
    db: SlotDatabase, role: PasswordRole
) -> None:
    done = await run_command("grant", "--role", role.name, "--dry-run", "--database-url", db.url)
    worker = await run_command(
        "once", "--as-of", AS_OF.isoformat(), "--database-url", role.url_for(db.url)
    )

    assert done.returncode == 0, done.describe()
    assert done.stdout.count("GRANT ") == 8
    assert ";;" not in done.stdout
    assert (
        f"role '{role.name}' would then: SELECT, UPDATE (status, updated_at, version) on "
        "availability_slots" in done.stdout
    )
    assert f"role '{role.name}' would have exactly the worker's privileges" in done.stdout
    assert worker.returncode == 1  # it still may not read the slots: refused at start
    assert worker.stderr.splitlines() == [
        f"slot-expiration: error: role {role.name} cannot run a cycle: no SELECT on "
        "availability_slots; no UPDATE (status) on availability_slots; no UPDATE (updated_at) "
        "on availability_slots; no UPDATE (version) on availability_slots; no SELECT on "
        "slot_expiration_failures; no INSERT on slot_expiration_failures; no UPDATE on "
        "slot_expiration_failures; no DELETE on slot_expiration_failures; no SELECT on "
        "slot_expiration_alembic_version; no SELECT on slot_expiration_cycles; no INSERT on "
        "slot_expiration_cycles; no DELETE on slot_expiration_cycles; no SELECT on "
        "slot_expiration_pauses; as the owner of "
        "availability_slots, run "
        f"`slot-expiration grant --role {role.name}` (SQLSTATE 42501)"
    ]


async def test_grant_to_an_unknown_role_is_one_line_and_exit_2(db: SlotDatabase) -> None:
    done = await run_command("grant", "--role", "nobody_here", "--database-url", db.url)

    assert done.returncode == 2, done.describe()
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "slot-expiration: error: role 'nobody_here' does not exist: create it first "
        "(CREATE ROLE \"nobody_here\" LOGIN PASSWORD '...')"
    ]


async def test_the_statements_of_a_dry_run_are_valid_sql_that_grants_what_it_said(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await db.insert(past_slots(2))
    printed = await run_command("grant", "--role", role.name, "--dry-run", "--database-url", db.url)

    await db.execute(printed.stdout)  # the whole output, as psql would run it
    once = await run_command(
        "once", "--json", "--as-of", AS_OF.isoformat(), "--database-url", role.url_for(db.url)
    )

    assert once.returncode == 0, once.describe()
    assert json.loads(once.stdout)["expired_count"] == 2


async def test_grant_refuses_the_connecting_role_with_one_line_and_exit_2(
    db: SlotDatabase,
) -> None:
    done = await run_command("grant", "--role", "postgres", "--database-url", db.url)

    assert done.returncode == 2, done.describe()
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "slot-expiration: error: role 'postgres' is the role running grant: the worker must "
        "log in as another; nothing was changed"
    ]


async def test_grant_refuses_a_role_a_membership_makes_a_superuser_naming_the_chain(
    db: SlotDatabase, role: PasswordRole
) -> None:
    ops = f"{role.name}_ops"
    await db.execute(sql.SQL("CREATE ROLE {} SUPERUSER").format(sql.Identifier(ops)))
    await db.execute(
        sql.SQL("GRANT {} TO {}").format(sql.Identifier(ops), sql.Identifier(role.name))
    )
    try:
        done = await run_command("grant", "--role", role.name, "--database-url", db.url)
    finally:
        await db.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(ops)))

    assert done.returncode == 2, done.describe()
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        f"slot-expiration: error: role '{role.name}' can reach '{ops}', a superuser, who can "
        f"do everything, through its memberships {role.name} -> {ops} "
    )
    assert await _privileges(db, role.name) == 0


async def _privileges(db: SlotDatabase, role: str) -> int:
    cursor = await db.conn.execute(
        "SELECT count(*) FROM information_schema.role_table_grants WHERE grantee = %s", [role]
    )
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])
