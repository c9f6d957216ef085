"""`slot-expiration status`: the state of the slot table and the worker, read-only."""

from __future__ import annotations

import asyncio
import json

import click

from slot_expiration.cli.common import guarded, required_url, settings_from
from slot_expiration.cli.option_flags import option
from slot_expiration.domain import utc_now
from slot_expiration.options import CycleOptions, DatabaseOptions
from slot_expiration.status import collect_status, render_text

# The selection's plan is shown for the worker's default batch: status reads no
# worker option (each command reads only its own).
EXPLAINED_BATCH_SIZE = CycleOptions.model_fields["batch_size"].default


@click.command()
@click.option("--json", "json_output", is_flag=True, help="Print the report as one JSON object.")
@option(DatabaseOptions, "database_url")
def status(json_output: bool, database_url: str | None) -> None:
    """Counts by status, the backlog, the oldest overdue slot, the worker's sessions, the
    slots in quarantine and the selection's index. Reads only; a part the role may not
    read says why in its place."""
    settings = settings_from(DatabaseOptions, database_url=database_url)
    url = required_url(settings)
    as_of = utc_now()
    report = guarded(
        lambda: asyncio.run(collect_status(url, as_of, EXPLAINED_BATCH_SIZE)), settings
    )
    click.echo(json.dumps(report.as_json()) if json_output else render_text(report))
