"""`slot-expiration demo`: the worker on a private PostgreSQL (or a given database)."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from slot_expiration.cli.common import guarded, settings_from
from slot_expiration.cli.errors import ExitCode, fail
from slot_expiration.cli.option_flags import options
from slot_expiration.demo import DemoPlan, run_demo
from slot_expiration.embedded import EmbeddedPostgres, EmbeddedPostgresError
from slot_expiration.loop import terminate_as_interrupt
from slot_expiration.options import DemoOptions, LogFormat, WorkerOptions
from slot_expiration.telemetry import configure_logging

T = TypeVar("T")


@click.command()
@options(
    DemoOptions,
    "database_url",
    "interval_seconds",
    "max_cycles",
    "metrics_addr",
    environment=False,
)
def demo(**given: Any) -> None:
    """Start a private PostgreSQL, seed demo slots, run the worker a few cycles, show counts.

    With --database-url it runs on that database instead (it gets demo rows).
    """
    options = settings_from(DemoOptions, environment=False, **given)
    configure_logging(LogFormat.CONSOLE, level=logging.WARNING)
    plan = DemoPlan(max_cycles=options.max_cycles)
    if options.database_url is not None:
        guarded(lambda: asyncio.run(run_demo(options, plan, sys.stdout)), options)
        return
    guarded(
        lambda: embedded_server_errors(lambda: _demo_on_embedded_server(options, plan)), options
    )


def embedded_server_errors(action: Callable[[], T]) -> T:
    """A private server that cannot start (no binaries, no unprivileged account) is one
    line and exit 1, like any failure; only the commands that start one know of it."""
    try:
        return action()
    except EmbeddedPostgresError as exc:
        fail(str(exc), ExitCode.FAILURE)


def _demo_on_embedded_server(options: WorkerOptions, plan: DemoPlan) -> None:
    with terminate_as_interrupt(), EmbeddedPostgres() as server:
        click.echo(f"embedded PostgreSQL on 127.0.0.1:{server.port} (data in {server.data_dir})")
        embedded = options.with_database_url(server.url)
        try:
            asyncio.run(run_demo(embedded, plan, sys.stdout))
        finally:
            click.echo("stopping the embedded PostgreSQL")
