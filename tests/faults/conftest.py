"""Fixtures of the fault suite: the figures collector, servers of the tests' own.

Faults that stop, restart or promote a server use servers started here, never
the session's shared one (tests/conftest.py: pg_server).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from slot_expiration.embedded import EmbeddedPostgres
from tests.conftest import scratch_database, upgrade_template
from tests.e2e.command import Finished, Running, with_password
from tests.faults.workers import Record, logged_failures
from tests.support.fault_report import REPORT_VARIABLE, FaultFigures, FaultReport
from tests.support.servers import ControlledServer, version_of

_REPORT = pytest.StashKey[FaultReport]()
_STARTED = pytest.StashKey[float]()

Measure = Callable[[str, dict[str, Any]], None]


def _report(config: pytest.Config) -> FaultReport:
    if _REPORT not in config.stash:
        config.stash[_REPORT] = FaultReport()
        config.stash[_STARTED] = time.monotonic()
    return config.stash[_REPORT]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if item.get_closest_marker("faults") is not None and (report.when == "call" or report.failed):
        _report(item.config).outcome(item.nodeid, report.outcome)
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get(REPORT_VARIABLE)
    if not target or _REPORT not in session.config.stash:
        return
    report = session.config.stash[_REPORT]
    report.environment = {
        "PostgreSQL": version_of("postgres").removeprefix("postgres (PostgreSQL) "),
        "PgBouncer": version_of("pgbouncer").removeprefix("PgBouncer "),
        "CPUs": str(os.cpu_count()),
    }
    report.write(Path(target), time.monotonic() - session.config.stash[_STARTED])


@pytest.fixture
def record_fault(request: pytest.FixtureRequest) -> Record:
    """Keep this test's figures for docs/reliability.md (FaultBooks.close calls it, before the
    test asserts anything)."""
    report = _report(request.config)

    def record(figures: FaultFigures, logs: Iterable[Running | Finished] = ()) -> None:
        report.record(request.node.nodeid, figures)
        logged = logged_failures(figures.fault, logs)
        if logged["failed cycles"]:
            report.measure("logged", logged)

    return record


@pytest.fixture
def measure(request: pytest.FixtureRequest) -> Measure:
    """Add a row to a named table of measurements in docs/reliability.md."""
    return _report(request.config).measure


@pytest.fixture
def secret_url(database_url: str) -> str:
    """The test database on the shared server, with a password (ignored: trust)."""
    return with_password(database_url)


@pytest.fixture(scope="module")
def own_server() -> Iterator[ControlledServer]:
    """A server of this module's own, with the migrated template, to stop and restart."""
    with EmbeddedPostgres() as server:
        upgrade_template(server)
        yield ControlledServer(server)


@pytest.fixture
def own_database_url(own_server: ControlledServer) -> Iterator[str]:
    own_server.start()
    with scratch_database(own_server.server, "fault") as url:
        yield url
        own_server.start()  # dropping the database needs the server up
