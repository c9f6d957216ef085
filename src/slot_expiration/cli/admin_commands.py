"""Database administration for the worker: its least-privileged role."""

from __future__ import annotations

import asyncio

import click

from slot_expiration.cli.common import database_url_option, guarded, options_from, required_url
from slot_expiration.store.privileges import grant_worker_privileges


@click.command()
@click.option("--role", required=True, help="The (existing) database role the worker logs in as.")
@click.option("--dry-run", is_flag=True, help="Print the statements; change nothing.")
@database_url_option
def grant(role: str, dry_run: bool, database_url: str | None) -> None:
    """Give a role exactly what the worker needs (run as the tables' owner, after migrate).

    SELECT on availability_slots, UPDATE of only status, updated_at and version,
    the quarantine table slot_expiration_failures, and reading the schema version.
    Whatever else the role had on these tables is revoked first.
    """
    options = options_from(database_url=database_url)
    url = required_url(options)
    statements = guarded(
        lambda: asyncio.run(grant_worker_privileges(url, role, apply=not dry_run)), options
    )
    for statement in statements:
        click.echo(f"{statement};")
    if not dry_run:
        click.echo(f"granted: role {role!r} has exactly the worker's privileges")
