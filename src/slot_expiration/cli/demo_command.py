"""`slot-expiration demo`: the worker on a private PostgreSQL (or a given database)."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from typing import TypeVar

import click

from slot_expiration.cli.common import guarded, settings_from
from slot_expiration.cli.errors import ExitCode, fail
from slot_expiration.demo import DemoPlan, run_demo
from slot_expiration.embedded import EmbeddedPostgres, EmbeddedPostgresError
from slot_expiration.loop import terminate_as_interrupt
from slot_expiration.options import LogFormat, WorkerOptions
from slot_expiration.telemetry import configure_logging

T = TypeVar("T")


@click.command()
@click.option(
    "--database-url",
    help="Use this database instead of a private embedded server (it gets demo rows).",
)
@click.option("--interval-seconds", type=float, default=1.0, show_default=True,
              help="Seconds between ticks.")  # fmt: skip
@click.option("--max-cycles", type=click.IntRange(min=1), default=6, show_default=True,
              help="Stop after this many cycles (or once the backlog is gone).")  # fmt: skip
@click.option("--metrics-addr", default="127.0.0.1:0", show_default=True,
              help="host:port of /metrics, /healthz and /readyz while the demo runs; "
                   "port 0 picks a free one, '' turns them off.")  # fmt: skip
def demo(
    database_url: str | None, interval_seconds: float, max_cycles: int, metrics_addr: str
) -> None:
    """Start a private PostgreSQL, seed demo slots, run the worker a few cycles, show counts."""
    options = settings_from(
        WorkerOptions,
        environment=False,
        database_url=database_url,
        interval_seconds=interval_seconds,
        metrics_addr=metrics_addr,
    )
    configure_logging(LogFormat.CONSOLE, level=logging.WARNING)
    plan = DemoPlan(max_cycles=max_cycles)
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
