"""Least privilege: what the worker's database role may do, granted exactly.

`migrate` runs as the schema's owner; the worker runs as a role that may read
the slot table, update only status, updated_at and version, and keep its own
quarantine. The statements live in queries.sql; only the role's and the
schema's names are filled in, as identifiers quoted by psycopg.sql.
"""

from __future__ import annotations

from typing import Any, Final

import psycopg
from psycopg import sql

from slot_expiration.store.errors import (
    SchemaMissingError,
    SlotStoreError,
    StoreConnectError,
    first_line,
    translate,
)
from slot_expiration.store.queries import query

WORKER_GRANTS: Final = (
    "revoke_worker_privileges",
    "grant_schema_usage",
    "grant_slot_read",
    "grant_slot_transition",
    "grant_quarantine",
    "grant_schema_version_read",
)


class UnknownRoleError(SlotStoreError):
    def __init__(self, role: str) -> None:
        super().__init__(
            f"role {role!r} does not exist: create it first "
            f"(CREATE ROLE {sql.Identifier(role).as_string()} LOGIN PASSWORD '...')"
        )


class NotOwnerError(SlotStoreError):
    def __init__(self, owner: str) -> None:
        super().__init__(
            f"only the owner of availability_slots ({owner}) can grant the worker's "
            "privileges: run grant with the URL migrate uses"
        )


def worker_grant_statements(role: str, schema: str) -> list[sql.Composed]:
    """The statements that give `role` exactly the worker's privileges, in order."""
    names = {"role": sql.Identifier(role), "schema": sql.Identifier(schema)}
    return [sql.SQL(query(name)).format(**names) for name in WORKER_GRANTS]


async def grant_worker_privileges(database_url: str, role: str, *, apply: bool = True) -> list[str]:
    """Apply the grants in one transaction (as the tables' owner); returns the statements.

    With `apply` False nothing is changed: the statements are only composed.
    """
    try:
        conn = await psycopg.AsyncConnection.connect(database_url, connect_timeout=10)
    except psycopg.Error as exc:
        raise StoreConnectError(first_line(exc)) from exc
    async with conn:
        try:
            statements = await _grant(conn, role, apply)
        except psycopg.Error as exc:
            raise translate(exc) from exc
        if not apply:
            await conn.rollback()
    return statements


async def _grant(conn: psycopg.AsyncConnection[Any], role: str, apply: bool) -> list[str]:
    cursor = await conn.execute(query("role_exists"), {"role": role})
    if not (row := await cursor.fetchone()) or not row[0]:
        raise UnknownRoleError(role)
    cursor = await conn.execute(query("slot_table_owner"))
    if (table := await cursor.fetchone()) is None:
        raise SchemaMissingError
    schema, owner, acts_as_owner = table
    if not acts_as_owner:
        raise NotOwnerError(owner)
    statements = worker_grant_statements(role, schema)
    for statement in statements if apply else ():
        await conn.execute(statement)
    return [statement.as_string(conn) for statement in statements]
