"""The `slot-expiration` command line: migrate, once, run, demo.

Command and option names are a contract other tools script against.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from slot_expiration.cli.errors import PROGRAM, ExitCode, fail
from slot_expiration.demo import DemoPlan, run_demo
from slot_expiration.embedded import EmbeddedPostgres, EmbeddedPostgresError
from slot_expiration.loop import CycleBudgetExceededError, terminate_as_interrupt
from slot_expiration.options import (
    ENV_PREFIX,
    LogFormat,
    OptionsError,
    WorkerOptions,
    load_options,
    redact_url,
    url_secrets,
)
from slot_expiration.store import SlotStoreError, StoreConnectError, StoreUnavailableError
from slot_expiration.store.migrate import upgrade
from slot_expiration.telemetry import configure_logging
from slot_expiration.worker import run_once, run_worker

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def _env_option(name: str, help_text: str, value_type: Any = str) -> Callable[[F], F]:
    """An option that also reads SLOT_EXPIRATION_<NAME>, shown in --help.

    Click only parses the type here; ranges and the URL are checked once, by
    the options object, so flags and environment obey the same rules.
    """
    env = f"{ENV_PREFIX}{name.upper()}"
    flag = "--" + name.replace("_", "-")
    return click.option(flag, name, type=value_type, envvar=env, show_envvar=True, help=help_text)


database_url_option = _env_option("database_url", "PostgreSQL URL: postgresql://user@host/db")
batch_size_option = _env_option("batch_size", "Rows per cycle, 1..10000. [default: 500]", int)
max_cycle_option = _env_option(
    "max_cycle_seconds", "Budget of one cycle; past it the batch is rolled back. [default: 30]",
    float,
)  # fmt: skip
log_format_option = _env_option(
    "log_format",
    "Logs on stderr: one JSON object per line, or console lines. [default: json]",
    click.Choice([f.value for f in LogFormat], case_sensitive=False),
)


@click.group(
    name=PROGRAM,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="slot-expiration", prog_name=PROGRAM)
def cli() -> None:
    """Moves Available slots whose start has passed to Expired, in batches, oldest first."""


@cli.command()
@database_url_option
def migrate(database_url: str | None) -> None:
    """Create or update the schema (availability_slots). Running it twice is a no-op."""
    options = _options(database_url=database_url)
    url = _required_url(options)
    outcome = _guarded(lambda: upgrade(url), options)
    if outcome.changed:
        click.echo(f"schema migrated from {outcome.before or 'empty'} to {outcome.after}")
    else:
        click.echo(f"schema already at {outcome.after}: nothing to do")


@cli.command()
@database_url_option
@batch_size_option
@click.option(
    "--as-of", "as_of", help="The cycle's clock, ISO-8601; no offset means UTC. [default: now]"
)
@click.option("--json", "json_output", is_flag=True, help="Print the result as one JSON object.")
@max_cycle_option
@log_format_option
def once(as_of: str | None, json_output: bool, **given: Any) -> None:
    """Run exactly one cycle and report what it did."""
    options = _options(**given)
    _required_url(options)
    moment = _parse_as_of(as_of)
    configure_logging(options.log_format)
    result = _guarded(lambda: asyncio.run(run_once(options, moment)), options)
    summary = result.summary()
    if json_output:
        click.echo(json.dumps(summary))
        return
    click.echo(
        f"expired {summary['expired_count']}, skipped (locked) "
        f"{summary['skipped_locked_count']}, failed {summary['failed_count']}, "
        f"{summary['duration_ms']} ms"
    )


@cli.command()
@database_url_option
@batch_size_option
@_env_option("interval_seconds", "Seconds between ticks (fixed rate). [default: 300]", float)
@max_cycle_option
@_env_option(
    "shutdown_grace_seconds",
    "On SIGTERM/SIGINT, how long the cycle in flight may still commit; past it, or on a "
    "second signal, it is rolled back. [default: 10]",
    float,
)
@log_format_option
def run(**given: Any) -> None:
    """Poll until SIGTERM or SIGINT, then stop gracefully (exit 0)."""
    options = _options(**given)
    _required_url(options)
    configure_logging(options.log_format)
    _guarded(lambda: asyncio.run(run_worker(options)), options)


@cli.command()
@click.option(
    "--database-url",
    help="Use this database instead of a private embedded server (it gets demo rows).",
)
@click.option("--interval-seconds", type=float, default=1.0, show_default=True,
              help="Seconds between ticks.")  # fmt: skip
@click.option("--max-cycles", type=click.IntRange(min=1), default=6, show_default=True,
              help="Stop after this many cycles (or once the backlog is gone).")  # fmt: skip
def demo(database_url: str | None, interval_seconds: float, max_cycles: int) -> None:
    """Start a private PostgreSQL, seed demo slots, run the worker a few cycles, show counts."""
    options = _options(
        environment=False, database_url=database_url, interval_seconds=interval_seconds
    )
    configure_logging(LogFormat.CONSOLE, level=logging.WARNING)
    plan = DemoPlan(max_cycles=max_cycles)
    if options.database_url is not None:
        _guarded(lambda: asyncio.run(run_demo(options, plan, sys.stdout)), options)
        return
    _guarded(lambda: _demo_on_embedded_server(options, plan), options)


def _demo_on_embedded_server(options: WorkerOptions, plan: DemoPlan) -> None:
    with terminate_as_interrupt(), EmbeddedPostgres() as server:
        click.echo(f"embedded PostgreSQL on 127.0.0.1:{server.port} (data in {server.data_dir})")
        embedded = options.with_database_url(server.url)
        try:
            asyncio.run(run_demo(embedded, plan, sys.stdout))
        finally:
            click.echo("stopping the embedded PostgreSQL")


def _options(**given: Any) -> WorkerOptions:
    try:
        return load_options(**given)
    except OptionsError as exc:
        fail(str(exc), ExitCode.USAGE, _input_secrets())


def _required_url(options: WorkerOptions) -> str:
    try:
        return options.require_database_url()
    except OptionsError as exc:
        fail(str(exc), ExitCode.USAGE)


def _guarded(action: Callable[[], T], options: WorkerOptions) -> T:
    """Run a command's work; a failure it can explain becomes one line and exit 1."""
    url = options.database_url.get_secret_value() if options.database_url else ""
    try:
        return action()
    except StoreConnectError as exc:
        where = redact_url(url) if url else "the database"
        fail(f"cannot connect to the database ({where}): {exc}", ExitCode.FAILURE, url_secrets(url))
    except StoreUnavailableError as exc:
        fail(f"database error: {exc}", ExitCode.FAILURE, url_secrets(url))
    except asyncio.CancelledError:
        fail("interrupted: the cycle was rolled back", ExitCode.INTERRUPTED)
    except (SlotStoreError, CycleBudgetExceededError, EmbeddedPostgresError) as exc:
        fail(str(exc), ExitCode.FAILURE, url_secrets(url))


def _parse_as_of(value: str | None) -> datetime:
    if value is None:
        return datetime.now(UTC)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        fail(f"--as-of {value!r} is not an ISO-8601 date-time", ExitCode.USAGE)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _input_secrets() -> list[str]:
    """Passwords in any URL the user gave, on the command line or in the environment."""
    urls = [os.environ.get(f"{ENV_PREFIX}DATABASE_URL", ""), *sys.argv]
    return [secret for url in urls if "://" in url for secret in url_secrets(url)]


def main() -> None:
    """Console entry point: click's own usage errors become one line too."""
    try:
        code = cli.main(prog_name=PROGRAM, standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else exc.format_message())
        raise SystemExit(ExitCode.USAGE) from None
    except click.ClickException as exc:
        fail(exc.format_message(), ExitCode.USAGE, _input_secrets())
    except (click.exceptions.Abort, KeyboardInterrupt):
        print(f"{PROGRAM}: interrupted", file=sys.stderr)
        raise SystemExit(ExitCode.INTERRUPTED) from None
    raise SystemExit(code if isinstance(code, int) else ExitCode.OK)
