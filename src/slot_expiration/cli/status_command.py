"""`slot-expiration status`: the state of the slot table and the worker, read-only."""

from __future__ import annotations

import asyncio
import json

import click

from slot_expiration.cli.common import database_url_option, guarded, options_from, required_url
from slot_expiration.domain import utc_now
from slot_expiration.status import collect_status, render_text


@click.command()
@click.option("--json", "json_output", is_flag=True, help="Print the report as one JSON object.")
@database_url_option
def status(json_output: bool, database_url: str | None) -> None:
    """Counts by status, the backlog, the oldest overdue slot, the worker's sessions, the
    slots in quarantine and the selection's index. Reads only."""
    options = options_from(database_url=database_url)
    url = required_url(options)
    as_of = utc_now()
    report = guarded(lambda: asyncio.run(collect_status(url, as_of, options.batch_size)), options)
    click.echo(json.dumps(report.as_json()) if json_output else render_text(report))
