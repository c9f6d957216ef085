"""The suite's own PostgreSQL: one embedded server, a migrated template, a database per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from uuid import uuid4

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from psycopg import sql

from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.loop import terminate_as_interrupt
from slot_expiration.schema.migrate import upgrade
from tests.support.artifact import stale_install_reason
from tests.support.database import SlotDatabase
from tests.support.roles import PasswordRole, password_role

TEMPLATE = "slot_template"

# Hypothesis judges behaviour here, never speed: its timing checks (a deadline per example,
# "input generation is slow") only measure how busy the machine is, a shared 2-core CI
# runner included, and would fail a correct test on a loaded one.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


def pytest_configure(config: pytest.Config) -> None:
    """The suite proves what users install: it runs only against the wheel of this checkout,
    installed non-editable (./scripts/test builds and installs it), never the source tree."""
    reason = stale_install_reason()
    if reason is not None:
        pytest.exit(
            f"{reason}; the suite runs against the installed wheel: ./scripts/test builds and "
            "installs it (or: source scripts/lib/setup.sh && ensure_package)",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


@pytest.fixture(scope="session")
def pg_server() -> Iterator[EmbeddedPostgres]:
    # A SIGTERM to the test run (a cancelled CI job) unwinds like Ctrl-C, so the
    # server is stopped and its folder removed.
    with terminate_as_interrupt(), EmbeddedPostgres() as server:
        upgrade_template(server)
        yield server


def upgrade_template(server: EmbeddedPostgres) -> None:
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE)))
    upgrade(server.url_for(TEMPLATE))


@contextmanager
def scratch_database(
    server: EmbeddedPostgres, prefix: str, template: str | None = TEMPLATE
) -> Iterator[str]:
    """A new database (a copy of the migrated template, or empty), dropped afterwards."""
    name = f"{prefix}_{uuid4().hex[:12]}"
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        create += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(create)
    try:
        yield server.url_for(name)
    finally:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def database_url(pg_server: EmbeddedPostgres) -> Iterator[str]:
    """A fresh, migrated database for one test, copied from the template (fast)."""
    with scratch_database(pg_server, "test") as url:
        yield url


@pytest.fixture
def empty_database_url(pg_server: EmbeddedPostgres) -> Iterator[str]:
    """A database with no schema at all, for the migration tests."""
    with scratch_database(pg_server, "empty", template=None) as url:
        yield url


@pytest.fixture
def role(pg_server: EmbeddedPostgres) -> Iterator[PasswordRole]:
    """A login role with a password the server really checks (SCRAM over TCP)."""
    with password_role(pg_server) as created:
        yield created


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[SlotDatabase]:
    async with SlotDatabase.open(database_url) as database:
        yield database
