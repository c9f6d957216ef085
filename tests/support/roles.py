"""Database roles that must log in with a password, on the suite's own server.

The suite's server trusts local connections; for these roles a pg_hba.conf
line (placed first, so it wins) demands SCRAM over TCP, so a wrong password
is really refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit
from uuid import uuid4

import psycopg
from psycopg import sql

from slot_expiration.embedded import EmbeddedPostgres


@dataclass(frozen=True, slots=True)
class PasswordRole:
    name: str
    password: str

    def url_for(self, database_url: str, password: str | None = None) -> str:
        """`database_url` logging in as this role (with `password`, or its own)."""
        parts = urlsplit(database_url)
        secret = quote(password if password is not None else self.password, safe="")
        netloc = f"{self.name}:{secret}@{parts.hostname}:{parts.port}"
        return urlunsplit(parts._replace(netloc=netloc))


@contextmanager
def password_role(server: EmbeddedPostgres) -> Iterator[PasswordRole]:
    role = PasswordRole(name=f"worker_{uuid4().hex[:10]}", password=f"pw-{uuid4().hex}")
    hba = server.data_dir / "pg_hba.conf"
    rule = f"host all {role.name} 127.0.0.1/32 scram-sha-256\n"
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role.name), sql.Literal(role.password)
            )
        )
        original = hba.read_text()
        hba.write_text(rule + original)
        conn.execute("SELECT pg_reload_conf()")
    try:
        yield role
    finally:
        with psycopg.connect(server.url, autocommit=True) as conn:
            hba.write_text(hba.read_text().replace(rule, "", 1))
            conn.execute("SELECT pg_reload_conf()")
            for database in _databases(conn):
                _drop_owned_in(server.url_for(database), role.name)
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role.name)))


def _databases(conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
    rows = conn.execute("SELECT datname FROM pg_database WHERE datallowconn").fetchall()
    return [str(row[0]) for row in rows]


def _drop_owned_in(url: str, role: str) -> None:
    """Grants live per database: they must go before the role can."""
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
    except psycopg.OperationalError:
        pass  # the database went away meanwhile: its grants with it
