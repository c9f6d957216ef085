"""A misconfigured worker says so: a missing grant, column or table fails the cycle as
misconfigured (before anything is locked), naming what is missing and the command that
fixes it; the backlog is still measured; readiness turns 503; the loop recovers alone."""

from __future__ import annotations

import asyncio

import pytest
from psycopg import sql

from slot_expiration.db import ErrorFamily, MisconfiguredStoreError, SchemaMissingError
from slot_expiration.domain import CycleOutcome, SlotStatus
from slot_expiration.expiry import CycleRun, outcome_of
from slot_expiration.loop import StopSignal, fan_out
from slot_expiration.options import load_options
from slot_expiration.schema.grants import GrantMode, grant_privileges
from slot_expiration.worker import build_loop, check_ready
from slot_expiration.worker.observability import readiness_for
from tests.support.cycles import BatchLog, make_cycle, run_cycle
from tests.support.database import SlotDatabase
from tests.support.doubles import ManualTicker, RecordingSink
from tests.support.roles import PasswordRole
from tests.support.slots import AS_OF, past_slots

pytestmark = pytest.mark.integration


async def test_a_role_that_may_read_but_not_update_fails_misconfigured_naming_the_fix(
    db: SlotDatabase, role: PasswordRole
) -> None:
    slots = await db.insert(past_slots(4))
    await grant_privileges(db.url, role.name, GrantMode.READ_ONLY)
    log = BatchLog()
    cycle = make_cycle(role.url_for(db.url))

    with pytest.raises(MisconfiguredStoreError) as failed:
        await cycle.run(_run(log))

    message = str(failed.value)
    assert message.startswith(f"role {role.name} cannot run a cycle: no UPDATE (status) on ")
    assert "no INSERT on slot_expiration_failures" in message
    assert message.endswith(f"run `slot-expiration grant --role {role.name}`")
    assert (failed.value.sqlstate, failed.value.family) == ("42501", ErrorFamily.MISCONFIGURED)
    assert outcome_of(failed.value) is CycleOutcome.MISCONFIGURED
    assert log.batches == []  # refused before anything was locked
    assert log.backlogs == [len(slots)]  # the backlog is still measured
    assert set((await db.statuses()).values()) == {SlotStatus.AVAILABLE}


async def test_the_same_check_refuses_to_start_the_worker(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await grant_privileges(db.url, role.name, GrantMode.READ_ONLY)

    with pytest.raises(MisconfiguredStoreError, match="no UPDATE \\(version\\)"):
        await check_ready(load_options(database_url=role.url_for(db.url)))


@pytest.mark.parametrize(
    ("change", "named", "fix", "sqlstate"),
    [
        (
            "ALTER TABLE availability_slots DROP COLUMN version",
            "column availability_slots.version does not exist",
            "restore it, migrate cannot",
            "42703",
        ),
        (
            "DROP TABLE slot_expiration_failures",
            "table slot_expiration_failures does not exist",
            "run `slot-expiration migrate`",
            "42P01",
        ),
        # The worker's own quarantine, not the calendar's table: migrate repairs it.
        (
            "ALTER TABLE slot_expiration_failures RENAME COLUMN next_attempt_at TO due_at",
            "column slot_expiration_failures.next_attempt_at does not exist",
            "run `slot-expiration migrate`",
            "42P01",
        ),
        (
            "DROP TABLE slot_expiration_cycles",
            "table slot_expiration_cycles does not exist",
            "run `slot-expiration migrate`",
            "42P01",
        ),
    ],
)
async def test_a_dropped_column_or_table_fails_the_cycle_naming_the_right_fix(
    db: SlotDatabase, change: str, named: str, fix: str, sqlstate: str
) -> None:
    await db.insert(past_slots(3))
    await db.execute(change)

    with pytest.raises(SchemaMissingError) as failed:
        await run_cycle(db.url)

    assert named in str(failed.value)
    assert fix in str(failed.value)
    assert failed.value.sqlstate == sqlstate


async def test_a_renamed_column_of_the_quarantine_never_blames_the_calendars_table(
    db: SlotDatabase,
) -> None:
    await db.execute("ALTER TABLE slot_expiration_failures RENAME COLUMN attempts TO tries")

    with pytest.raises(SchemaMissingError) as refused:
        await check_ready(load_options(database_url=db.url))

    assert "column slot_expiration_failures.attempts does not exist" in str(refused.value)
    assert "calendar's table contract" not in str(refused.value)


ROW_SECURITY = [
    pytest.param(
        "CREATE POLICY all_rows ON availability_slots TO {role} USING (true)",
        True,
        id="a permissive policy showing the worker every row",
    ),
    pytest.param(
        "CREATE POLICY all_rows ON availability_slots USING (true)",
        True,
        id="a permissive policy showing everyone every row",
    ),
    pytest.param(
        "CREATE POLICY reads ON availability_slots FOR SELECT TO {role} USING (true); "
        "CREATE POLICY updates ON availability_slots FOR UPDATE TO {role} USING (true) "
        "WITH CHECK (true)",
        True,
        id="every row to read and to update, in two policies",
    ),
    pytest.param(
        "CREATE POLICY one_tenant ON availability_slots TO {role} "
        "USING (tenant_id = '00000000-0000-0000-0000-000000000000')",
        False,
        id="a tenant's rows only",
    ),
    pytest.param(
        "CREATE POLICY reads ON availability_slots FOR SELECT TO {role} USING (true)",
        False,
        id="every row to read, none to update",
    ),
    pytest.param(
        "CREATE POLICY all_rows ON availability_slots TO {role} USING (true); "
        "CREATE POLICY not_booked ON availability_slots AS RESTRICTIVE TO {role} "
        "USING (status <> 'Booked')",
        False,
        id="every row, but a restrictive policy holds some back",
    ),
    pytest.param(
        "CREATE POLICY all_rows ON availability_slots TO pg_monitor USING (true)",
        False,
        id="every row, to a role the worker is not",
    ),
]


@pytest.mark.parametrize(("policies", "accepted"), ROW_SECURITY)
async def test_row_level_security_is_accepted_only_when_it_shows_the_worker_every_row(
    db: SlotDatabase, role: PasswordRole, policies: str, accepted: bool
) -> None:
    slots = await db.insert(past_slots(3))
    await grant_privileges(db.url, role.name)
    await db.execute("ALTER TABLE availability_slots ENABLE ROW LEVEL SECURITY")
    await db.execute(policies.format(role=sql.Identifier(role.name).as_string()))

    if not accepted:
        with pytest.raises(MisconfiguredStoreError, match="row-level security"):
            await run_cycle(role.url_for(db.url))
        assert set((await db.statuses()).values()) == {SlotStatus.AVAILABLE}
        return
    result = await run_cycle(role.url_for(db.url))
    assert result.expired_count == len(slots)


async def test_grants_revoked_while_running_make_it_unready_and_it_recovers_alone(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await grant_privileges(db.url, role.name)
    options = load_options(database_url=role.url_for(db.url), batch_size=50)
    readiness = readiness_for(options)
    recorded, ticker, stop = RecordingSink(), ManualTicker(), StopSignal()
    loop = build_loop(options, fan_out(recorded, readiness), ticker)
    running = asyncio.create_task(loop.run(stop))
    try:
        await db.insert(past_slots(3))
        revoke = sql.SQL("REVOKE UPDATE ON availability_slots FROM {}")
        await db.execute(revoke.format(sql.Identifier(role.name)))
        ticker.tick()
        await recorded.next_outcome()
        unready = await readiness.report()

        await grant_privileges(db.url, role.name)
        ticker.tick()
        await recorded.next_outcome()
        ready = await readiness.report()
    finally:
        stop.request()
        stop.request()
        await running

    (ended,) = recorded.failed
    assert ended.result.outcome is CycleOutcome.MISCONFIGURED
    assert not unready.ready
    assert "misconfigured (SQLSTATE 42501)" in unready.detail
    assert "no UPDATE (status) on availability_slots" in unready.detail
    assert recorded.backlogs[0] == 3  # measured while the cycle failed
    assert recorded.completed[0].expired_count == 3
    assert ready.ready, ready.detail


def _run(log: BatchLog) -> CycleRun:
    return CycleRun(as_of=AS_OF, emit=log)


async def test_row_level_security_hiding_rows_from_the_worker_is_a_misconfiguration(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await db.insert(past_slots(3))
    await grant_privileges(db.url, role.name)
    await db.execute("ALTER TABLE availability_slots ENABLE ROW LEVEL SECURITY")

    with pytest.raises(MisconfiguredStoreError, match="row-level security") as failed:
        await run_cycle(role.url_for(db.url))

    assert "BYPASSRLS" in str(failed.value)
    assert set((await db.statuses()).values()) == {SlotStatus.AVAILABLE}
