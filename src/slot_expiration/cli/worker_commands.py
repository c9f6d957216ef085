"""The worker's commands: migrate the schema, run one cycle, run the polling loop."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from slot_expiration.cli.common import (
    cycle_options,
    database_url_option,
    env_option,
    guarded,
    options_from,
    required_url,
)
from slot_expiration.cli.errors import ExitCode, fail
from slot_expiration.cycle import CycleResult
from slot_expiration.store.schema_version import upgrade
from slot_expiration.telemetry import configure_logging
from slot_expiration.worker import run_once, run_worker
from slot_expiration.worker.open_files import raise_open_files_limit

# An --as-of further ahead than this expires slots people can still book.
FUTURE_AS_OF_TOLERANCE = timedelta(minutes=1)


@click.command()
@database_url_option
def migrate(database_url: str | None) -> None:
    """Create or update the schema (availability_slots). Running it twice is a no-op."""
    options = options_from(database_url=database_url)
    url = required_url(options)
    outcome = guarded(lambda: upgrade(url), options)
    if outcome.changed:
        click.echo(f"schema migrated from {outcome.before or 'empty'} to {outcome.after}")
    else:
        click.echo(f"schema already at {outcome.after}: nothing to do")


@click.command()
@click.option(
    "--as-of", "as_of", help="The cycle's clock, ISO-8601; no offset means UTC. [default: now]"
)
@click.option(
    "--allow-future-as-of",
    is_flag=True,
    help="Accept an --as-of more than a minute ahead: it expires slots that can still be booked.",
)
@click.option("--json", "json_output", is_flag=True, help="Print the result as one JSON object.")
@cycle_options
def once(as_of: str | None, allow_future_as_of: bool, json_output: bool, **given: Any) -> None:
    """Run exactly one cycle and report what it did."""
    options = options_from(**given)
    required_url(options)
    now = datetime.now(UTC)
    moment = parse_as_of(as_of, now, allow_future=allow_future_as_of)
    configure_logging(options.log_format)
    result = guarded(lambda: asyncio.run(run_once(options, moment)), options)
    if json_output:
        click.echo(json.dumps(result.summary()))
    else:
        click.echo(_one_line(result))


def _one_line(result: CycleResult) -> str:
    batches = f" in {result.batches} batches" if result.batches != 1 else ""
    return (
        f"expired {result.expired_count}{batches}, skipped (locked) "
        f"{result.skipped_locked_count}, failed {result.failed_count}, "
        f"{round(result.duration_ms, 3)} ms"
    )


@click.command()
@cycle_options
@env_option("interval_seconds", "Seconds between ticks (fixed rate). [default: 300]", float)
@env_option(
    "shutdown_grace_seconds",
    "On SIGTERM/SIGINT, how long the cycle in flight may still commit; past it, or on a "
    "second signal, it is rolled back. [default: 10]",
    float,
)
@env_option(
    "metrics_addr",
    "host:port of /metrics, /healthz and /readyz; port 0 picks a free one, '' turns the "
    "endpoint off. [default: 127.0.0.1:9464]",
)
def run(**given: Any) -> None:
    """Poll until SIGTERM or SIGINT, then stop gracefully (exit 0)."""
    options = options_from(**given)
    required_url(options)
    configure_logging(options.log_format)
    raise_open_files_limit()
    guarded(lambda: asyncio.run(run_worker(options)), options)


def parse_as_of(value: str | None, now: datetime, *, allow_future: bool) -> datetime:
    """The cycle's clock from --as-of; one more than a minute ahead needs the explicit flag."""
    if value is None:
        return now
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        fail(f"--as-of {value!r} is not an ISO-8601 date-time", ExitCode.USAGE)
    moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    if moment - now > FUTURE_AS_OF_TOLERANCE and not allow_future:
        fail(
            f"--as-of {value} is in the future: it would expire slots that can still be "
            "booked; pass --allow-future-as-of if that is what you want",
            ExitCode.USAGE,
        )
    return moment
