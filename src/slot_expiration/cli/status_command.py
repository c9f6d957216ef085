"""`slot-expiration status`: the state of the slot table and the worker, read-only."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import NoReturn

import click

from slot_expiration.cli.common import guarded, located, required_url, settings_from
from slot_expiration.cli.common import store_failure as store_failure_line
from slot_expiration.cli.option_flags import options
from slot_expiration.domain import utc_now
from slot_expiration.options import DatabaseOptions, StatusOptions
from slot_expiration.status import StatusReport, collect_status, render_text
from slot_expiration.status.check import Level, judge
from slot_expiration.status.report import EXPLAINED_BATCH_SIZE
from slot_expiration.store import StoreError


@click.command()
@click.option("--json", "json_output", is_flag=True, help="Print the report as one JSON object.")
@click.option(
    "--check",
    is_flag=True,
    help="Judge the report with the alerts' thresholds: one summary line, exit 0 (OK), "
    "1 (WARNING) or 2 (CRITICAL), for cron jobs and probes.",
)
@options(StatusOptions, "database_url", "schema", "interval_seconds")
def status(
    json_output: bool,
    check: bool,
    database_url: str | None,
    schema: str | None,
    interval_seconds: str | None,
) -> None:
    """The cycles of every worker (last success, last failure, the last hour), counts by
    status, the backlog, the oldest overdue slot, the worker's sessions, the slots in
    quarantine and the selection's index. Reads only; a part the role may not read says
    why in its place."""
    # Only --check reads the interval: a bad value of it never breaks the report itself.
    settings = (
        settings_from(
            StatusOptions,
            database_url=database_url,
            schema=schema,
            interval_seconds=interval_seconds,
        )
        if check
        else settings_from(DatabaseOptions, database_url=database_url, schema=schema)
    )
    url = required_url(settings)
    as_of = utc_now()

    def collect() -> StatusReport:
        return asyncio.run(collect_status(url, as_of, EXPLAINED_BATCH_SIZE))

    if not check:
        report = guarded(collect, settings)
        click.echo(json.dumps(report.as_json()) if json_output else render_text(report))
        return
    assert isinstance(settings, StatusOptions)  # --check loaded the interval
    verdict = judge(_checked(collect, url, settings), settings.interval_seconds)
    if json_output:
        click.echo(json.dumps({"check": verdict.as_json()}))
    else:
        click.echo(verdict.summary())
    raise SystemExit(int(verdict.level))


def _checked(
    collect: Callable[[], StatusReport], url: str, settings: StatusOptions
) -> StatusReport:
    """The report; a database that cannot be read is itself the check's answer."""
    try:
        return collect()
    except StoreError as exc:
        _critical(store_failure_line(located(exc, settings), url))


def _critical(message: str) -> NoReturn:
    click.echo(f"{Level.CRITICAL.name}: {' '.join(message.split())}")
    raise SystemExit(int(Level.CRITICAL))
