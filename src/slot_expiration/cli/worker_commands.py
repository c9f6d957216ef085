"""The worker's commands: migrate the schema, run one cycle, run the polling loop."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

import click

from slot_expiration.cli.common import guarded, required_url, settings_from, store_failure
from slot_expiration.cli.errors import ExitCode, fail
from slot_expiration.cli.option_flags import options
from slot_expiration.cli.progress import DrainSeen, drain_bar
from slot_expiration.cli.warnings import log_environment_warnings
from slot_expiration.db import StoreError
from slot_expiration.domain import CycleOutcome
from slot_expiration.domain.text import excerpt
from slot_expiration.expiry import (
    BACKLOG_COUNT_CAP,
    CycleFailed,
    CycleResult,
    DrainProgress,
    StopReason,
)
from slot_expiration.options import (
    CycleOptions,
    MigrateOptions,
    MigrationSqlOptions,
    WorkerOptions,
)
from slot_expiration.schema.version import HEAD_REVISION
from slot_expiration.status.wording import count_of, left_text
from slot_expiration.telemetry import configure_logging
from slot_expiration.telemetry.native_stderr import native_stderr_logged
from slot_expiration.worker import run_once, run_worker

if TYPE_CHECKING:
    from slot_expiration.schema.migrate import MigrationOutcome

# An --as-of further ahead than this expires slots people can still book.
FUTURE_AS_OF_TOLERANCE = timedelta(minutes=1)
# The --as-of a cycle accepts: a day inside the years 1 to 9999, so that the history's
# as_of reads back as a date-time in any time zone (and status can compute with it).
EARLIEST_AS_OF = datetime(1, 1, 2, tzinfo=UTC)
LATEST_AS_OF = datetime(9999, 12, 30, 23, 59, 59, tzinfo=UTC)
# A cycle's options, in the model's order (as --help lists them).
CYCLE_OPTIONS = tuple(CycleOptions.model_fields)


@click.command()
@click.option(
    "--sql",
    "as_sql",
    is_flag=True,
    help="Print the SQL instead of running it, for review: written offline, without "
    "reading the database (no URL needed).",
)
@click.option(
    "--adopt",
    is_flag=True,
    help="With --sql: the SQL that adopts the calendar's existing availability_slots.",
)
@click.option(
    "--from",
    "from_revision",
    metavar="REVISION",
    help="With --sql: from this revision on (the database's, as `status` shows it). "
    "[default: an empty database]",
)
@options(MigrateOptions, "database_url", "schema", "lock_timeout_seconds")
def migrate(as_sql: bool, adopt: bool, from_revision: str | None, **given: Any) -> None:
    """Create the schema, or adopt the calendar's availability_slots, or update it, and
    repair what the worker owns (its tables, their columns, its indexes).

    Running it again is a no-op; several at once take turns. On a schema a newer
    release migrated it does nothing (migrations only add).
    """
    if as_sql:
        # Written offline: the database's options are never read, so never break it.
        offline = settings_from(
            MigrationSqlOptions,
            lock_timeout_seconds=given["lock_timeout_seconds"],
            schema=given["schema"],
        )
        click.echo(_migration_sql(offline, adopt, from_revision), nl=False)
        return
    settings = settings_from(MigrateOptions, **given)
    if adopt or from_revision is not None:
        fail(
            "--adopt and --from go with --sql; migrate itself looks at the database", ExitCode.USAGE
        )
    url = required_url(settings)
    outcome = guarded(lambda: _migrate(url, settings), settings)
    for line in migration_report(outcome):
        click.echo(line)


def _migrate(url: str, settings: MigrateOptions) -> MigrationOutcome:
    from slot_expiration.schema import migrate as migrations  # noqa: PLC0415 - Alembic only now

    # Said while it waits, not when it ends: flushed, a pipe (a Job's log) sees it at once.
    def waiting() -> None:
        click.echo("another migrate is running on this database: waiting for it to finish")
        sys.stdout.flush()

    def locked() -> None:
        click.echo(
            f"a lock a step needs is held by another transaction: trying again, each try "
            f"waiting at most {migrations.LOCK_TRY_MS} ms (no calendar write queues behind "
            f"migrate longer), for {settings.lock_timeout_seconds:g} s in all"
        )
        sys.stdout.flush()

    return migrations.upgrade(
        url, lock_timeout_ms=settings.lock_timeout_ms, on_wait=waiting, on_lock_wait=locked
    )


def _migration_sql(settings: MigrationSqlOptions, adopt: bool, from_revision: str | None) -> str:
    from slot_expiration.db.errors import MigrationError  # noqa: PLC0415
    from slot_expiration.schema import migrate as migrations  # noqa: PLC0415 - Alembic only now

    try:
        return migrations.upgrade_sql(
            adopt=adopt,
            from_revision=from_revision,
            lock_timeout_ms=settings.lock_timeout_ms,
            schema=settings.schema or None,
        )
    except MigrationError as exc:
        fail(str(exc), ExitCode.FAILURE)


def migration_report(outcome: MigrationOutcome) -> list[str]:
    """What migrate did, first line first; then what adoption kept or left out."""
    if outcome.ahead:
        ahead = f"{outcome.before} > {HEAD_REVISION}"
        return [f"the database is ahead of this release ({ahead}): nothing to do"]
    if not outcome.changed:
        return [f"schema already at {outcome.after}: nothing to do"]
    if outcome.before == outcome.after:
        return [f"schema at {outcome.after}: repaired what the worker owns", *outcome.notes]
    first = f"schema migrated from {outcome.before or 'empty'} to {outcome.after}"
    if outcome.adopted:
        first += (
            ", adopting the calendar's availability_slots (its data, columns, constraints, "
            "triggers, grants and other indexes untouched)"
        )
    return [first, *outcome.notes]


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
@options(CycleOptions, *CYCLE_OPTIONS)
def once(as_of: str | None, allow_future_as_of: bool, json_output: bool, **given: Any) -> None:
    """Run exactly one cycle and report what it did.

    Interrupted (SIGINT, SIGTERM) or past its budget, it reports what its committed
    batches did; the batch in flight was rolled back. While the deployment is paused
    (`slot-expiration pause`) it expires nothing, says so and exits 0 (outcome `paused`).
    """
    settings = settings_from(CycleOptions, **given)
    required_url(settings)
    now = datetime.now(UTC)
    moment = parse_as_of(as_of, now, allow_future=allow_future_as_of)
    with native_stderr_logged():
        # On a terminal, a drain's bar below its log lines; elsewhere the log lines only.
        bar = drain_bar(settings, sys.stderr)
        configure_logging(settings.log_format, stream=None if bar is None else bar.lines)
        log_environment_warnings()
        seen = DrainSeen()
        sinks = (seen,) if bar is None else (seen, bar)
        try:
            result = guarded(
                lambda: asyncio.run(
                    run_once(settings, moment, as_of_is_now=as_of is None, extra_sinks=sinks)
                ),
                settings,
            )
        except CycleFailed as failed:
            if json_output:
                click.echo(json.dumps(failed.ended.result.summary()))
            interrupted = failed.outcome is CycleOutcome.INTERRUPTED
            code = ExitCode.INTERRUPTED if interrupted else ExitCode.FAILURE
            fail(cut_short_line(failed, settings, seen.latest), code)
    if json_output:
        click.echo(json.dumps(result.summary()))
    else:
        click.echo(_one_line(result))
        click.echo(stop_line(result, settings, seen.latest))


# How to go on after a drain cut short, by how it was cut short.
_GO_ON: Final = {
    CycleOutcome.INTERRUPTED: "run again to go on",
    CycleOutcome.BUDGET_EXCEEDED: "run again or raise --max-cycle-seconds",
}


def cut_short_line(
    failed: CycleFailed, settings: CycleOptions, drain: DrainProgress | None = None
) -> str:
    """What stopped the cycle, with its SQLSTATE and fix, and what did commit; for a drain
    interrupted or past its budget, what is left of its count at its start (no count
    follows such a cycle) and how to go on."""
    partial = failed.ended.result
    committed = f"{count_of(partial.expired_count, 'row')} expired in " + (
        count_of(partial.batches, "committed batch", "committed batches")
    )
    in_flight = "no batch was in flight"
    if failed.ended.batch_in_flight:
        fate = "may or may not have committed" if failed.batch_in_doubt else "was rolled back"
        in_flight = f"the batch in flight {fate}"
    if (go_on := _GO_ON.get(failed.outcome)) is not None:
        stopped = (
            "interrupted"
            if failed.outcome is CycleOutcome.INTERRUPTED
            else f"the cycle ran past its budget of {settings.max_cycle_seconds:g} s"
        )
        left = "" if drain is None else f"; {_drain_left_text(drain)}: {go_on}"
        return f"{stopped}: {committed}; {in_flight}{left}"
    # The database's message within it bounded as the log line and the history bound it.
    cause = excerpt(
        store_failure(failed.error, required_url(settings))
        if isinstance(failed.error, StoreError)
        else str(failed)
    )
    return cause if partial.batches == 0 else f"{cause}; before it, {committed}; {in_flight}"


def stop_line(
    result: CycleResult, settings: CycleOptions, drain: DrainProgress | None = None
) -> str:
    """Why a cycle that succeeded ran no further batch, what it left due, and what to do:
    `stopped at the cycle budget (30 s): 51,500 left; run again or raise
    --max-cycle-seconds`. A drain's last progress (`drain`) tells what is left past the
    cap of the count after the cycle."""
    left = _left_text(result, drain)
    match result.stop_reason:
        case StopReason.BUDGET:
            budget = settings.max_cycle_seconds
            return (
                f"stopped at the cycle budget ({budget:g} s): {left}; "
                "run again or raise --max-cycle-seconds"
            )
        case StopReason.MAX_BATCHES:
            limit = count_of(settings.max_batches_per_cycle, "batch", "batches")
            return (
                f"stopped at the batch limit ({limit}): {left}; "
                "run again or raise --max-batches-per-cycle"
            )
        case StopReason.STOP_REQUESTED:
            return f"stopped on request (SIGTERM or SIGINT): {left}; run again to go on"
        case StopReason.THROTTLED:
            lag = settings.max_replica_lag_seconds
            return (
                f"held by a streaming standby further behind than {lag:g} s until the cycle "
                f"budget ran out: {left}; it goes on once the standby catches up "
                "(see docs/operations.md, a drain the calendar never feels)"
            )
        case _:  # drained: the last batch came back short
            return _drained_line(result.backlog, left)


def _drained_line(backlog: int | None, left: str) -> str:
    if backlog == 0:
        return "drained: nothing left due"
    if backlog is None:
        return f"drained: {left}"
    return (
        f"drained what it could: {left}, locked by other transactions or waiting "
        "in quarantine (see `slot-expiration status`)"
    )


def _left_text(result: CycleResult, drain: DrainProgress | None) -> str:
    """`51,500 left`; past the count's cap, `about 197,500 left` from the drain's count at
    its start less what it expired (rows booked meanwhile aside), or `at least 100,000
    left`."""
    if result.backlog is None:
        return "what is left was not counted"
    capped = result.backlog >= BACKLOG_COUNT_CAP
    if capped and drain is not None and not drain.capped and drain.left > result.backlog:
        return _drain_left_text(drain)
    return left_text(result.backlog, capped)


def _drain_left_text(drain: DrainProgress) -> str:
    """`about 51,500 left` of the drain's count at its start (rows booked or archived
    meanwhile are still in it); `at least 51,500 left` where that count stopped at its
    cap."""
    return f"{'at least' if drain.capped else 'about'} {drain.left:,} left"


def _one_line(result: CycleResult) -> str:
    if result.pause is not None:
        return (
            f"{result.pause.text()}; this cycle expired nothing (`slot-expiration resume` "
            "ends the pause)"
        )
    batches = f" in {result.batches} batches" if result.batches != 1 else ""
    return (
        f"expired {result.expired_count}{batches}, skipped (locked) "
        f"{result.skipped_locked_count}, failed {result.failed_count}, "
        f"{round(result.duration_ms, 3)} ms"
    )


@click.command()
@options(WorkerOptions, *CYCLE_OPTIONS)
@options(WorkerOptions, "interval_seconds", "shutdown_grace_seconds", "metrics_addr")
def run(**given: Any) -> None:
    """Poll until SIGTERM or SIGINT, then stop gracefully (exit 0)."""
    settings = settings_from(WorkerOptions, **given)
    required_url(settings)
    with native_stderr_logged():
        bar = drain_bar(settings, sys.stderr)
        configure_logging(settings.log_format, stream=None if bar is None else bar.lines)
        log_environment_warnings()
        bars = () if bar is None else (bar,)
        guarded(lambda: asyncio.run(run_worker(settings, extra_sinks=bars)), settings)


def _utc_text(moment: datetime) -> str:
    # isoformat pads the year to four digits, where strftime's %Y does not (year 1).
    return moment.isoformat().replace("+00:00", "Z")


def parse_as_of(value: str | None, now: datetime, *, allow_future: bool) -> datetime:
    """The cycle's clock from --as-of, within what PostgreSQL and the cycle history hold
    (EARLIEST_AS_OF..LATEST_AS_OF); one more than a minute ahead needs the explicit flag.
    An error says what was expected, never what was typed (it could be anything: a URL
    pasted into the wrong option, say)."""
    if value is None:
        return now
    expected = (
        f"an ISO-8601 date-time from {_utc_text(EARLIEST_AS_OF)} to {_utc_text(LATEST_AS_OF)} "
        "(no offset means UTC), such as 2026-12-05T12:00:00Z"
    )
    try:
        given = datetime.fromisoformat(value)
        moment = (given if given.tzinfo is not None else given.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError):
        fail(f"--as-of: expected {expected}", ExitCode.USAGE)
    if not EARLIEST_AS_OF <= moment <= LATEST_AS_OF:
        fail(f"--as-of: expected {expected}", ExitCode.USAGE)
    if moment - now > FUTURE_AS_OF_TOLERANCE and not allow_future:
        fail(
            f"--as-of {moment.isoformat()} is in the future: it would expire slots that can "
            "still be booked; pass --allow-future-as-of if that is what you want",
            ExitCode.USAGE,
        )
    return moment
