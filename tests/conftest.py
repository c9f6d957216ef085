"""The suite's own PostgreSQL: one embedded server, a migrated template, a database per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from uuid import uuid4

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from psycopg import sql

from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.loop import terminate_as_interrupt
from slot_expiration.schema.migrate import upgrade
from tests.support.artifact import (
    PACKAGE,
    imported_from_source_tree,
    installed_package,
    stale_install_reason,
    under_test,
)
from tests.support.database import SlotDatabase
from tests.support.roles import PasswordRole, password_role

TEMPLATE = "slot_template"

# Hypothesis judges behaviour here, never speed: its timing checks (a deadline per example,
# "input generation is slow") only measure how busy the machine is, a shared 2-core CI
# runner included, and would fail a correct test on a loaded one.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


TESTS = Path(__file__).resolve().parent
# The tiers that test the code and may run on the source tree (./scripts/test --fast); every
# other tier (e2e, faults, deploy, bench) proves what users install: the wheel, the image.
SOURCE_TREE_TIERS = frozenset({"unit", "integration"})


def pytest_configure(config: pytest.Config) -> None:
    """The suite runs this checkout's code: the wheel built from it, installed non-editable
    (./scripts/test builds and installs it), or for the unit and integration tiers the source
    tree itself (./scripts/test --fast); never a stale install."""
    reason = stale_install_reason()
    if reason is not None:
        pytest.exit(
            f"{reason}; the suite runs against the installed wheel: ./scripts/test builds and "
            "installs it (or: source scripts/lib/setup.sh && ensure_package)",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


def pytest_report_header() -> str:
    return f"slot_expiration under test: {under_test()}"


def tier_of(item: pytest.Item) -> str:
    """The tier a test is in: its folder under tests/."""
    if not item.path.is_relative_to(TESTS) or item.path.parent == TESTS:
        return str(item.path)
    return item.path.relative_to(TESTS).parts[0]


_REFUSED = pytest.StashKey[str]()


@pytest.hookimpl(trylast=True)  # after -m, -k and --deselect: the tests that will run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not imported_from_source_tree():
        return
    refused = [item for item in items if tier_of(item) not in SOURCE_TREE_TIERS]
    if not refused:
        return
    reason = (
        f"{PACKAGE} is imported from the source tree ({installed_package()}): the tests of "
        f"{', '.join(sorted({tier_of(item) for item in refused}))} run against the installed "
        "wheel, which ./scripts/test builds and installs; on the source tree (./scripts/test "
        "--fast) only the unit and integration tiers run"
    )
    if not hasattr(config, "workerinput"):
        raise pytest.UsageError(reason)
    # A pytest-xdist worker cannot end the run with a message: each such test fails with it.
    for item in refused:
        item.stash[_REFUSED] = reason


def pytest_runtest_setup(item: pytest.Item) -> None:
    if _REFUSED in item.stash:
        pytest.fail(item.stash[_REFUSED], pytrace=False)


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
