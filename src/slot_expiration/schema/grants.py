"""Least privilege: give a role what the worker (or a read-only view) needs, and say
what the role can then do.

`grant` runs as the owner of availability_slots. It grants what is missing and
never revokes a privilege the role may need for other work, unless asked to
(`revoke_extra`): only then does it revoke what the role holds directly beyond
its needs. What the role holds through a membership (or PUBLIC) is reported,
not touched. It refuses a role that owns the table, is a superuser, or is the
one running it, and one that can become such a role (or a predefined role that
writes any table) through a chain of memberships, INHERIT or not: such a role
can do everything anyway, and "exactly" would be a lie. The statements are the
templates of privileges.sql; only identifiers and privilege keywords of a fixed
list are filled in, by psycopg.sql.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from psycopg import sql

from slot_expiration.db.errors import SchemaMissingError, StoreError
from slot_expiration.db.session import ApplicationName, Session, SessionSettings
from slot_expiration.schema.location import verify_slot_table

SLOT_TABLE: Final = "availability_slots"


class Privilege(StrEnum):
    SELECT = "SELECT"
    INSERT = "INSERT"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    TRUNCATE = "TRUNCATE"
    REFERENCES = "REFERENCES"
    TRIGGER = "TRIGGER"


class GrantMode(StrEnum):
    WORKER = "worker"  # what a cycle needs
    READ_ONLY = "read-only"  # what status, quarantine list and /readyz need


class GrantRefusedError(StoreError):
    """The role must not be given the worker's privileges; nothing was changed."""


class UnknownRoleError(GrantRefusedError):
    def __init__(self, role: str) -> None:
        super().__init__(
            f"role {role!r} does not exist: create it first "
            f"(CREATE ROLE {sql.Identifier(role).as_string()} LOGIN PASSWORD '...')"
        )


class NotOwnerError(StoreError):
    def __init__(self, owner: str) -> None:
        super().__init__(
            f"only the owner of availability_slots ({owner}) can grant the worker's "
            "privileges: run grant with the URL migrate uses"
        )


@dataclass(frozen=True, slots=True)
class TablePrivilege:
    """A privilege on one of the product's tables; `column` for a column's own."""

    relation: str
    privilege: Privilege
    column: str | None = None

    def sort_key(self) -> tuple[str, str, str]:
        """Table-wide first, then by column (None does not compare with a name)."""
        return (self.relation, self.privilege.value, self.column or "")


@dataclass(frozen=True, slots=True)
class HeldPrivilege:
    """A privilege the role can use: held directly, and/or through other roles."""

    privilege: TablePrivilege
    direct: bool
    via: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GrantReport:
    """What `grant` ran (or would run), and what the role can do afterwards."""

    role: str
    mode: GrantMode
    statements: tuple[str, ...]
    applied: bool
    can: tuple[TablePrivilege, ...]
    missing: tuple[TablePrivilege, ...]
    extra_direct: tuple[TablePrivilege, ...]
    extra_inherited: tuple[HeldPrivilege, ...] = field(default=())

    @property
    def exact(self) -> bool:
        return not (self.missing or self.extra_direct or self.extra_inherited)


async def grant_privileges(
    database_url: str,
    role: str,
    mode: GrantMode = GrantMode.WORKER,
    *,
    apply: bool = True,
    revoke_extra: bool = False,
) -> GrantReport:
    """Grant `mode`'s privileges to `role` in one transaction (as the table's owner).

    With `apply` False the statements run in a transaction that is rolled back:
    the report shows what they would do, and nothing changes.
    """
    settings = SessionSettings(ApplicationName.ADMIN)
    async with Session.open(database_url, settings) as session:
        grants = _Grants(session, role, mode)
        async with session.transaction(dry_run=not apply):
            schema = await grants.check_target()
            return await grants.run(schema, apply=apply, revoke_extra=revoke_extra)


@dataclass(frozen=True, slots=True)
class _Target:
    """grant_target's row: the role, the table's schema and owner, and what the role is
    or can become (see privileges.sql)."""

    role_oid: int | None
    schema: str
    owner: str
    we_act_as_owner: bool
    role_acts_as_owner: bool
    superuser: bool
    connecting: bool
    predefined: bool
    chain_to_power: list[str] | None
    power: str | None


class _Grants:
    def __init__(self, session: Session, role: str, mode: GrantMode) -> None:
        self._session = session
        self._role = role
        self._mode = mode

    async def check_target(self) -> str:
        """The table's schema, once it is the availability_slots meant (schema.location) and
        the role is known to be one we may grant to."""
        await verify_slot_table(self._session)
        found = await self._session.records("grant_target", _Target, {"role": self._role})
        if not found:
            raise SchemaMissingError("table availability_slots does not exist")
        target = found[0]
        if target.role_oid is None:
            raise UnknownRoleError(self._role)
        if not target.we_act_as_owner:
            raise NotOwnerError(target.owner)
        owns = target.role_acts_as_owner and target.chain_to_power is None
        refusal = (
            _refusal(self._role, target.owner, owns, target.superuser, target.connecting)
            or (
                f"role {self._role!r} is a predefined role of PostgreSQL: every member of it "
                "would get the worker's privileges; give the worker its own role"
                if target.predefined
                else None
            )
            or _reach_refusal(self._role, target.chain_to_power, target.power)
        )
        if refusal:
            raise GrantRefusedError(f"{refusal}; nothing was changed")
        return target.schema

    async def run(self, schema: str, *, apply: bool, revoke_extra: bool) -> GrantReport:
        wanted = await self._wanted()
        groups = []
        if revoke_extra:  # what is held before is read only to know what to revoke
            held = await self._held()
            groups = _revoked(_extras(held, wanted), held)
        revokes = [self._compose("revoke", *group) for group in groups]
        statements = [*revokes, *self._grant_statements(schema, wanted)]
        if self._mode is GrantMode.WORKER and await self._session.value("standbys_function_exists"):
            statements.append(
                self._session.template("grant_standbys_function").format(
                    schema=sql.Identifier(schema), role=sql.Identifier(self._role)
                )
            )
        for statement in statements:
            await self._session.execute_composed(statement)
        after = await self._held()
        extras = _extras(after, wanted)
        effective = {h.privilege for h in after}
        return GrantReport(
            role=self._role,
            mode=self._mode,
            statements=tuple(self._session.render(s) for s in statements),
            applied=apply,
            can=_sorted(effective),
            missing=_sorted(set(wanted) - effective),
            extra_direct=_sorted(h.privilege for h in extras if h.direct),
            # Held through a membership too: revoking the direct grant would not take it.
            extra_inherited=tuple(h for h in extras if h.via),
        )

    async def _wanted(self) -> list[TablePrivilege]:
        params = {"read_only": self._mode is GrantMode.READ_ONLY}
        return await self._session.records("grant_requirements", _wanted_privilege, params)

    async def _held(self) -> list[HeldPrivilege]:
        return await self._session.records("role_privileges", _held_privilege, {"role": self._role})

    def _grant_statements(
        self, schema: str, wanted: Sequence[TablePrivilege]
    ) -> list[sql.Composed]:
        usage = self._session.template("grant_schema_usage").format(
            schema=sql.Identifier(schema), role=sql.Identifier(self._role)
        )
        return [usage, *(self._compose("grant", *group) for group in _grouped(wanted))]

    def _compose(
        self, verb: str, relation: str, privileges: Sequence[Privilege], columns: Sequence[str]
    ) -> sql.Composed:
        kind = "column" if columns else "table"
        return self._session.template(f"{verb}_{kind}_privilege").format(
            privilege=sql.SQL(", ").join(sql.SQL(p.value) for p in privileges),
            column=sql.SQL(", ").join(sql.Identifier(c) for c in columns),
            table=sql.Identifier(relation),
            role=sql.Identifier(self._role),
        )


def _wanted_privilege(*, relation: str, column_name: str | None, privilege: str) -> TablePrivilege:
    return TablePrivilege(relation, Privilege(privilege), column_name)


def _held_privilege(
    *, relation: str, column_name: str | None, privilege: str, direct: bool, via: list[str]
) -> HeldPrivilege:
    return HeldPrivilege(
        _wanted_privilege(relation=relation, column_name=column_name, privilege=privilege),
        direct,
        tuple(via),
    )


def _refusal(role: str, owner: str, owns: bool, superuser: bool, connecting: bool) -> str | None:
    if connecting:
        return f"role {role!r} is the role running grant: the worker must log in as another"
    if superuser:
        return f"role {role!r} is a superuser: it can do everything; give the worker its own role"
    if owns:
        return (
            f"role {role!r} owns availability_slots (or acts as its owner {owner!r}): "
            "it can do everything there; give the worker its own role"
        )
    return None


# What a role reached through memberships could do instead of the worker's little.
_POWERS: Final = {
    "superuser": "a superuser, who can do everything",
    "owner": "the owner of availability_slots, who can do everything there",
    "writer": "a predefined role that writes any table or file",
}


def _reach_refusal(role: str, chain: list[str] | None, power: str | None) -> str | None:
    """A role that can become a powerful one: a member may SET ROLE to each role of the
    chain, INHERIT or not, so its own grants would not bound it."""
    if not chain or power is None:
        return None
    return (
        f"role {role!r} can reach {chain[-1]!r}, {_POWERS[power]}, through its memberships "
        f"{' -> '.join(chain)} (a member may SET ROLE to each, INHERIT or not): revoke a "
        "membership of that chain, or give the worker its own role"
    )


def _covered(held: TablePrivilege, wanted: set[TablePrivilege]) -> bool:
    """Whether a held privilege is one the mode wants (a column's UPDATE, column by column)."""
    if held in wanted:
        return True
    # A table-wide UPDATE shows column by column too: judged there.
    return (
        held.column is None and held.privilege is Privilege.UPDATE and held.relation == SLOT_TABLE
    )


def _extras(held: Iterable[HeldPrivilege], wanted: Iterable[TablePrivilege]) -> list[HeldPrivilege]:
    wanted_set = set(wanted)
    return [h for h in held if not _covered(h.privilege, wanted_set)]


def _revoked(
    extras: Sequence[HeldPrivilege], held: Sequence[HeldPrivilege]
) -> list[tuple[str, list[Privilege], list[str]]]:
    """What to REVOKE: each privilege held directly beyond the wanted ones.

    A column's UPDATE held through a table-wide UPDATE goes with that (revoking
    it takes the column grants too; the grants that follow restore the wanted ones).
    """
    table_wide = {
        h.privilege.relation
        for h in held
        if h.direct and h.privilege.column is None and h.privilege.privilege is Privilege.UPDATE
    }
    revoke: set[TablePrivilege] = set()
    for privilege in (h.privilege for h in extras if h.direct):
        if privilege.column is not None and privilege.relation in table_wide:
            revoke.add(TablePrivilege(privilege.relation, Privilege.UPDATE))
        else:
            revoke.add(privilege)
    return _grouped(_sorted(revoke))


def _sorted(privileges: Iterable[TablePrivilege]) -> tuple[TablePrivilege, ...]:
    return tuple(sorted(privileges, key=TablePrivilege.sort_key))


def _grouped(
    privileges: Iterable[TablePrivilege],
) -> list[tuple[str, list[Privilege], list[str]]]:
    """One statement's worth each: a table's own privileges together, and each
    privilege's columns together (GRANT UPDATE (a, b) ON TABLE t)."""
    tables: dict[str, list[Privilege]] = defaultdict(list)
    columns: dict[tuple[str, Privilege], list[str]] = defaultdict(list)
    for p in privileges:
        if p.column is None:
            tables[p.relation].append(p.privilege)
        else:
            columns[(p.relation, p.privilege)].append(p.column)
    return [
        *((relation, privs, []) for relation, privs in tables.items()),
        *((relation, [priv], cols) for (relation, priv), cols in columns.items()),
    ]
