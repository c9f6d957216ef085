"""The worker's role: exactly SELECT on the slots, UPDATE of status, updated_at and
version, its quarantine; it logs in with a password over TCP and does its job. `grant`
takes nothing the role may need elsewhere unless told to, refuses roles it must not
narrow, and says what the role can do, inherited rights included."""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

import psycopg
import pytest
from psycopg import sql

from slot_expiration.db import ErrorFamily, StoreError
from slot_expiration.domain import SlotStatus
from slot_expiration.history.housekeeping import Housekeeping, record_cycle
from slot_expiration.schema.grants import (
    GrantMode,
    GrantRefusedError,
    NotOwnerError,
    Privilege,
    TablePrivilege,
    UnknownRoleError,
    grant_privileges,
)
from tests.support.cycles import run_cycle
from tests.support.database import SlotDatabase
from tests.support.history import cycle_record, recorded_run_ids
from tests.support.roles import PasswordRole
from tests.support.slots import AS_OF, make_slot, past_slots
from tests.support.witness import witnessed

pytestmark = pytest.mark.integration


async def test_the_granted_role_records_its_cycles_and_purges_the_history(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await grant_privileges(db.url, role.name)
    old, recent = cycle_record(AS_OF - timedelta(days=20)), cycle_record(AS_OF)
    await record_cycle(Housekeeping(db.url, timedelta(days=14)), old)

    purged = await record_cycle(Housekeeping(role.url_for(db.url), timedelta(days=14)), recent)

    assert purged == 1
    assert await recorded_run_ids(db) == [recent.run_id]


async def test_the_granted_role_runs_cycles_and_keeps_its_quarantine(
    db: SlotDatabase, role: PasswordRole
) -> None:
    slots = await db.insert(past_slots(6))
    await db.install_poison_trigger([slots[0].id], "P0001")
    await grant_privileges(db.url, role.name)

    outcome = await run_cycle(role.url_for(db.url))

    assert (outcome.expired_count, outcome.failed_count) == (5, 1)
    assert set(await db.quarantine()) == {slots[0].id}
    await db.execute("DROP TRIGGER poison ON availability_slots")
    await db.execute("UPDATE slot_expiration_failures SET next_attempt_at = %s", AS_OF)
    async with witnessed(db.url) as witness:  # the witness's rights are the test's own
        await run_cycle(role.url_for(db.url))
    assert [s.id for s in witness.expired] == [slots[0].id]
    assert await db.quarantine() == {}


async def test_a_wrong_password_is_refused(db: SlotDatabase, role: PasswordRole) -> None:
    await grant_privileges(db.url, role.name)

    with pytest.raises(StoreError, match="password authentication failed") as refused:
        await run_cycle(role.url_for(db.url, password="wrong"))  # noqa: S106 - a wrong one

    assert refused.value.connecting
    assert refused.value.sqlstate == "28P01"
    assert refused.value.family is ErrorFamily.MISCONFIGURED


@pytest.mark.parametrize(
    ("what", "statement"),
    [
        ("insert a slot", "INSERT INTO availability_slots SELECT * FROM availability_slots"),
        ("delete a slot", "DELETE FROM availability_slots"),
        ("change tenant_id", "UPDATE availability_slots SET tenant_id = gen_random_uuid()"),
        ("change consultant_id", "UPDATE availability_slots SET consultant_id = tenant_id"),
        ("change start_at", "UPDATE availability_slots SET start_at = now()"),
        ("change end_at", "UPDATE availability_slots SET end_at = now()"),
        ("change created_at", "UPDATE availability_slots SET created_at = now()"),
        ("change id", "UPDATE availability_slots SET id = gen_random_uuid()"),
        ("drop the table", "DROP TABLE availability_slots"),
        ("truncate the table", "TRUNCATE availability_slots CASCADE"),
    ],
)
async def test_the_role_cannot(
    db: SlotDatabase, role: PasswordRole, what: str, statement: str
) -> None:
    await db.insert(past_slots(2))
    await grant_privileges(db.url, role.name)
    before = await db.rows()

    async with await psycopg.AsyncConnection.connect(role.url_for(db.url)) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.execute(statement)

    assert await db.rows() == before, what


async def test_the_role_may_write_exactly_the_three_transition_columns(
    db: SlotDatabase, role: PasswordRole
) -> None:
    (slot,) = await db.insert([make_slot(timedelta(minutes=-1))])
    await grant_privileges(db.url, role.name)

    async with await psycopg.AsyncConnection.connect(role.url_for(db.url)) as conn:
        await conn.execute(
            "UPDATE availability_slots SET status = 'Expired', updated_at = %s, "
            "version = version + 1 WHERE id = %s",
            (AS_OF, slot.id),
        )

    row = (await db.rows())[slot.id]
    assert (row.status, row.version, row.updated_at) == (SlotStatus.EXPIRED, 2, AS_OF)


WORKER_TABLE_GRANTS = {
    ("availability_slots", "SELECT"),
    ("slot_expiration_failures", "SELECT"),
    ("slot_expiration_failures", "INSERT"),
    ("slot_expiration_failures", "UPDATE"),
    ("slot_expiration_failures", "DELETE"),
    ("slot_expiration_alembic_version", "SELECT"),
    ("slot_expiration_cycles", "SELECT"),
    ("slot_expiration_cycles", "INSERT"),
    ("slot_expiration_cycles", "DELETE"),
    # The pause: read at each tick, never set (the operator's role pauses and resumes).
    ("slot_expiration_pauses", "SELECT"),
}


async def test_granting_twice_leaves_the_same_privileges_and_says_they_are_exact(
    db: SlotDatabase, role: PasswordRole
) -> None:
    first = await grant_privileges(db.url, role.name)
    granted = await table_privileges(db, role.name)

    second = await grant_privileges(db.url, role.name)

    assert first.statements == second.statements
    assert await table_privileges(db, role.name) == granted == WORKER_TABLE_GRANTS
    columns = await column_privileges(db, role.name, "availability_slots", "UPDATE")
    assert columns == {"status", "updated_at", "version"}
    assert second.exact
    assert not second.missing


async def test_grant_keeps_what_the_role_already_had_and_names_it(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await db.execute(f'GRANT INSERT, DELETE ON availability_slots TO "{role.name}"')

    report = await grant_privileges(db.url, role.name)

    held = await table_privileges(db, role.name)
    assert {("availability_slots", "INSERT"), ("availability_slots", "DELETE")} <= held
    assert set(report.extra_direct) == {
        TablePrivilege("availability_slots", Privilege.INSERT),
        TablePrivilege("availability_slots", Privilege.DELETE),
    }
    assert not report.exact


async def test_grant_revokes_what_the_role_holds_beyond_its_needs_only_when_told(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await db.execute(f'GRANT ALL ON availability_slots TO "{role.name}"')

    report = await grant_privileges(db.url, role.name, revoke_extra=True)

    assert await table_privileges(db, role.name) == WORKER_TABLE_GRANTS
    columns = await column_privileges(db, role.name, "availability_slots", "UPDATE")
    assert columns == {"status", "updated_at", "version"}
    assert report.exact
    assert any(statement.startswith("REVOKE") for statement in report.statements)


async def test_grant_reports_rights_the_role_inherits_through_a_membership(
    db: SlotDatabase, role: PasswordRole
) -> None:
    group = f"{role.name}_app"
    await db.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(group)))
    try:
        await db.execute(
            sql.SQL("GRANT DELETE ON availability_slots TO {}").format(sql.Identifier(group))
        )
        await db.execute(
            sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), sql.Identifier(role.name))
        )

        report = await grant_privileges(db.url, role.name, revoke_extra=True)

        (inherited,) = report.extra_inherited
        assert inherited.privilege == TablePrivilege("availability_slots", Privilege.DELETE)
        assert inherited.via == (group,)
        assert not report.exact
    finally:
        await db.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(group)))
        await db.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(group)))


async def test_grant_refuses_the_owner_a_superuser_and_the_connecting_role(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await db.execute(sql.SQL("ALTER ROLE {} SUPERUSER").format(sql.Identifier(role.name)))
    try:
        with pytest.raises(GrantRefusedError, match="is a superuser"):
            await grant_privileges(db.url, role.name)
    finally:
        await db.execute(sql.SQL("ALTER ROLE {} NOSUPERUSER").format(sql.Identifier(role.name)))
    with pytest.raises(GrantRefusedError, match="the role running grant"):
        await grant_privileges(db.url, "postgres")
    owner = f"{role.name}_owner"
    await db.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(owner)))
    try:
        await db.execute(
            sql.SQL("GRANT {} TO {}").format(sql.Identifier(owner), sql.Identifier(role.name))
        )
        await db.execute(
            sql.SQL("ALTER TABLE availability_slots OWNER TO {}").format(sql.Identifier(owner))
        )
        with pytest.raises(GrantRefusedError, match="the owner of availability_slots"):
            await grant_privileges(db.url, role.name)
    finally:
        await db.execute("ALTER TABLE availability_slots OWNER TO postgres")
        await db.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(owner)))
        await db.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(owner)))
    assert await table_privileges(db, role.name) == set()


async def test_read_only_grants_reading_and_nothing_else(
    db: SlotDatabase, role: PasswordRole
) -> None:
    report = await grant_privileges(db.url, role.name, GrantMode.READ_ONLY)

    assert await table_privileges(db, role.name) == {
        ("availability_slots", "SELECT"),
        ("slot_expiration_failures", "SELECT"),
        ("slot_expiration_alembic_version", "SELECT"),
        ("slot_expiration_cycles", "SELECT"),
        ("slot_expiration_pauses", "SELECT"),
    }
    assert report.exact


async def test_a_dry_run_composes_the_statements_and_changes_nothing(
    db: SlotDatabase, role: PasswordRole
) -> None:
    report = await grant_privileges(db.url, role.name, apply=False)

    assert any(f'TO "{role.name}"' in statement for statement in report.statements)
    assert not report.applied
    assert report.exact  # what the statements would give
    assert await table_privileges(db, role.name) == set()


async def test_an_unknown_role_is_named_and_nothing_is_granted(db: SlotDatabase) -> None:
    with pytest.raises(UnknownRoleError, match="no_such_role_x"):
        await grant_privileges(db.url, "no_such_role_x")


async def test_granting_needs_the_owner(db: SlotDatabase, role: PasswordRole) -> None:
    await grant_privileges(db.url, role.name)

    with pytest.raises(NotOwnerError, match="owner of availability_slots"):
        await grant_privileges(role.url_for(db.url), role.name)


async def table_privileges(db: SlotDatabase, role: str) -> set[tuple[str, str]]:
    cursor = await db.conn.execute(
        "SELECT table_name, privilege_type FROM information_schema.role_table_grants "
        "WHERE grantee = %s",
        [role],
    )
    return {(str(r[0]), str(r[1])) for r in await cursor.fetchall()}


async def column_privileges(db: SlotDatabase, role: str, table: str, privilege: str) -> set[str]:
    cursor = await db.conn.execute(
        "SELECT column_name FROM information_schema.column_privileges "
        "WHERE grantee = %s AND table_name = %s AND privilege_type = %s",
        [role, table, privilege],
    )
    return {str(r[0]) for r in await cursor.fetchall()}


async def test_a_role_with_a_table_wide_update_is_granted_and_told_what_it_keeps(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await db.execute(
        sql.SQL("GRANT UPDATE ON availability_slots TO {}").format(sql.Identifier(role.name))
    )

    kept = await grant_privileges(db.url, role.name)
    narrowed = await grant_privileges(db.url, role.name, revoke_extra=True)

    assert TablePrivilege("availability_slots", Privilege.UPDATE, "start_at") in kept.extra_direct
    assert not kept.exact
    assert narrowed.exact
    columns = await column_privileges(db, role.name, "availability_slots", "UPDATE")
    assert columns == {"status", "updated_at", "version"}


async def test_rights_of_a_predefined_role_it_belongs_to_are_named(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await db.execute(sql.SQL("GRANT pg_read_all_data TO {}").format(sql.Identifier(role.name)))

    report = await grant_privileges(db.url, role.name, GrantMode.READ_ONLY)

    held = {TablePrivilege("availability_slots", Privilege.SELECT)}
    assert held <= set(report.can)
    assert report.exact  # reading is all the read-only views need


def _chain(*names: str) -> list[sql.Composed]:
    """GRANT statements making each role a member of the next."""
    return [
        sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), sql.Identifier(member))
        for member, group in pairwise(names)
    ]


@pytest.mark.parametrize(
    ("top", "power"),
    [
        ("SUPERUSER", "a superuser, who can do everything"),
        ("owner", "the owner of availability_slots, who can do everything there"),
        ("pg_write_all_data", "a predefined role that writes any table or file"),
    ],
)
async def test_grant_refuses_a_role_that_can_reach_power_through_a_chain_of_memberships(
    db: SlotDatabase, role: PasswordRole, top: str, power: str
) -> None:
    middle = f"{role.name}_team"
    above = top if top.startswith("pg_") else f"{role.name}_{top.lower()}"
    created = [middle] if top.startswith("pg_") else [middle, above]
    for name in created:
        await db.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(name)))
    try:
        if top == "SUPERUSER":
            await db.execute(sql.SQL("ALTER ROLE {} SUPERUSER").format(sql.Identifier(above)))
        if top == "owner":
            await db.execute(
                sql.SQL("ALTER TABLE availability_slots OWNER TO {}").format(sql.Identifier(above))
            )
            await db.execute(sql.SQL("GRANT {} TO postgres").format(sql.Identifier(above)))
        # NOINHERIT: it inherits nothing, but may still SET ROLE along the chain.
        await db.execute(sql.SQL("ALTER ROLE {} NOINHERIT").format(sql.Identifier(role.name)))
        for statement in _chain(role.name, middle, above):
            await db.execute(statement)

        with pytest.raises(GrantRefusedError) as refused:
            await grant_privileges(db.url, role.name)
    finally:
        await db.execute("ALTER TABLE availability_slots OWNER TO postgres")
        for name in reversed(created):
            await db.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            await db.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))

    assert str(refused.value) == (
        f"role {role.name!r} can reach {above!r}, {power}, through its memberships "
        f"{role.name} -> {middle} -> {above} (a member may SET ROLE to each, INHERIT or not): "
        "revoke a membership of that chain, or give the worker its own role; nothing was changed"
    )
    assert await table_privileges(db, role.name) == set()


async def test_a_membership_in_a_role_that_only_reads_is_no_reason_to_refuse(
    db: SlotDatabase, role: PasswordRole
) -> None:
    readers = f"{role.name}_readers"
    await db.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(readers)))
    try:
        for statement in _chain(role.name, readers, "pg_read_all_stats"):
            await db.execute(statement)

        report = await grant_privileges(db.url, role.name)
    finally:
        await db.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(readers)))

    assert report.exact


async def test_grant_refuses_a_predefined_role(db: SlotDatabase) -> None:
    with pytest.raises(GrantRefusedError, match="predefined role"):
        await grant_privileges(db.url, "pg_read_all_data")
