"""`slot-expiration status`: the state of the slot table and the worker, read-only."""

from __future__ import annotations

import asyncio
import json
from typing import Any, NoReturn

import click

from slot_expiration.cli.common import guarded, located, required_url, settings_from
from slot_expiration.cli.common import store_failure as store_failure_line
from slot_expiration.cli.option_flags import options
from slot_expiration.db import StoreError
from slot_expiration.options import DatabaseOptions, OptionsError, StatusOptions, load_settings
from slot_expiration.status import StatusReport, collect_status, render_text
from slot_expiration.status.check import Level, Verdict, judge
from slot_expiration.status.report import EXPLAINED_BATCH_SIZE, collect_health


@click.command()
@click.option("--json", "json_output", is_flag=True, help="Print the report as one JSON object.")
@click.option(
    "--check",
    is_flag=True,
    help="Judge the deployment now with the alerts' thresholds: one summary line, exit 0 "
    "(OK), 1 (WARNING), 2 (CRITICAL) or 3 (UNKNOWN: nothing could be judged), the "
    "monitoring plugins' convention, for cron jobs and probes.",
)
@options(StatusOptions, "database_url", "schema", "interval_seconds", "replicas")
def status(json_output: bool, check: bool, **given: Any) -> None:
    """The cycles of every worker (last success, last failure, the last hour), counts by
    status, the backlog, the oldest overdue slot, the worker's sessions, the slots in
    quarantine and the selection's index. Reads only; a part the role may not read says
    why in its place. `--check` judges the deployment, and asks the replicas named by
    `--replicas` for their /readyz."""
    if check:
        _check(json_output, given)
    # Only --check reads the interval and the replicas: a bad value of either never breaks
    # the report itself.
    settings = settings_from(
        DatabaseOptions, database_url=given["database_url"], schema=given["schema"]
    )
    url = required_url(settings)

    def collect() -> StatusReport:
        return asyncio.run(collect_status(url, EXPLAINED_BATCH_SIZE))

    report = guarded(collect, settings)
    click.echo(json.dumps(report.as_json()) if json_output else render_text(report))


def _check(json_output: bool, given: dict[str, Any]) -> NoReturn:
    """The verdict, and its level as the exit status. Where nothing could be judged (a
    wrong option, no URL, a database that cannot be read), UNKNOWN and exit 3, still one
    line on stdout: what a monitoring plugin prints."""
    try:
        settings = load_settings(StatusOptions, **given)
        url = settings.require_database_url()
    except OptionsError as exc:
        _print(Verdict.unknown(str(exc)), json_output)
    try:
        health = asyncio.run(
            collect_health(url, settings.interval_seconds, settings.replica_addresses)
        )
    except StoreError as exc:
        _print(Verdict.unknown(store_failure_line(located(exc, settings), url)), json_output)
    _print(judge(health, settings.interval_seconds), json_output)


def _print(verdict: Verdict, json_output: bool) -> NoReturn:
    click.echo(json.dumps({"check": verdict.as_json()}) if json_output else verdict.summary())
    raise SystemExit(int(verdict.level))


def unknown_usage(message: str) -> NoReturn:
    """A usage error of `status --check` (an unknown flag, say), as the plugins say it."""
    click.echo(f"{Level.UNKNOWN.name}: {' '.join(message.split())}")
    raise SystemExit(int(Level.UNKNOWN))
