"""`slot-expiration quarantine`: the poison rows the worker passes over; retrying them at
once after the data was fixed, or parking them until someone does."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from typing import TypeVar
from uuid import UUID

import click

from slot_expiration.cli.common import COMMAND_LIMITS, guarded, required_url, settings_from
from slot_expiration.cli.errors import ExitCode, fail
from slot_expiration.cli.option_flags import options
from slot_expiration.db import ApplicationName
from slot_expiration.domain import utc_now
from slot_expiration.options import DatabaseOptions
from slot_expiration.quarantine import (
    EndedEntry,
    ListingFilter,
    QuarantineListing,
    QuarantineStore,
)
from slot_expiration.status.store import StatusStore
from slot_expiration.status.wording import count_of, one_line

_SQLSTATE = re.compile(r"[0-9A-Z]{5}")
T = TypeVar("T")


@click.group()
def quarantine() -> None:
    """Slots the database keeps rejecting: passed over until their next attempt."""


def _sqlstate(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not _SQLSTATE.fullmatch(value.upper()):
        raise click.BadParameter("a SQLSTATE is five digits or capital letters, e.g. 23514")
    return value.upper() if value is not None else None


@quarantine.command(name="list")
@options(DatabaseOptions, "database_url", "schema")
@click.option("--sqlstate", callback=_sqlstate, help="Only entries that failed with this SQLSTATE.")
@click.option("--tenant", "tenant_id", type=click.UUID, help="Only this tenant's slots.")
@click.option(
    "--history",
    is_flag=True,
    help="Entries that ended instead (expired, or left Available another way), as kept "
    "for the history's retention.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Show at most this many.",
)
@click.option("--json", "json_output", is_flag=True, help="Print one JSON array.")
def list_command(
    database_url: str | None,
    schema: str | None,
    sqlstate: str | None,
    tenant_id: UUID | None,
    history: bool,
    limit: int,
    json_output: bool,
) -> None:
    """Quarantined slots still Available, the latest failure first: attempts, next attempt
    (or parked), the database's reason. Reads only."""
    settings = settings_from(DatabaseOptions, database_url=database_url, schema=schema)
    url = required_url(settings)
    where = ListingFilter(sqlstate, tenant_id)
    if history:
        ended = guarded(lambda: _read(url, lambda q: q.ended(limit, where)), settings)
        _print_ended(ended, json_output)
        return
    listing = guarded(lambda: _read(url, lambda q: q.listing(limit, where)), settings)
    _print_listing(listing, json_output)


@quarantine.command()
@click.argument("slot_ids", nargs=-1, type=click.UUID)
@click.option(
    "--all", "every", is_flag=True, help="Retry every quarantined slot that is not parked."
)
@options(DatabaseOptions, "database_url", "schema")
def retry(
    slot_ids: tuple[UUID, ...], every: bool, database_url: str | None, schema: str | None
) -> None:
    """Make quarantined slots due now (a parked one too, when named): the worker's next
    cycle tries them again."""
    if bool(slot_ids) == every:
        fail("give slot ids or --all (not both)", ExitCode.USAGE)
    settings = settings_from(DatabaseOptions, database_url=database_url, schema=schema)
    url = required_url(settings)
    found = guarded(
        lambda: _change(url, lambda s: s.retry(slot_ids, utc_now(), every=every)), settings
    )
    click.echo(f"{count_of(len(found), 'quarantined slot')} due now; the next cycle retries them")


@quarantine.command()
@click.argument("slot_ids", nargs=-1, type=click.UUID, required=True)
@options(DatabaseOptions, "database_url", "schema")
def park(slot_ids: tuple[UUID, ...], database_url: str | None, schema: str | None) -> None:
    """Stop retrying quarantined slots until `quarantine retry` names them: they leave the
    worker's count of quarantined slots (and its alert) but stay in `list`."""
    settings = settings_from(DatabaseOptions, database_url=database_url, schema=schema)
    url = required_url(settings)
    found = guarded(lambda: _change(url, lambda s: s.park(slot_ids, utc_now())), settings)
    click.echo(
        f"{count_of(len(found), 'quarantined slot')} parked: not retried until "
        "`slot-expiration quarantine retry` names them"
    )


def _read(url: str, read: Callable[[QuarantineStore], Awaitable[T]]) -> T:
    async def reading() -> T:
        async with StatusStore.connect(url, ApplicationName.STATUS) as store:
            return await read(QuarantineStore(store.session))

    return asyncio.run(reading())


def _change(url: str, change: Callable[[QuarantineStore], Awaitable[list[UUID]]]) -> list[UUID]:
    async def changing() -> list[UUID]:
        async with QuarantineStore.connect(url, COMMAND_LIMITS) as store:
            return await change(store)

    return asyncio.run(changing())


def _print_listing(listing: QuarantineListing, json_output: bool) -> None:
    if json_output:
        click.echo(json.dumps([entry.as_json() for entry in listing.latest]))
        return
    parked = f", {listing.parked} of them parked" if listing.parked else ""
    shown = f" (the latest {len(listing.latest)} below)" if listing.latest else ""
    click.echo(f"{count_of(listing.total, 'slot')} in quarantine, still Available{parked}{shown}")
    for entry in listing.latest:
        when = (
            f"parked since {entry.parked_at.isoformat()}"
            if entry.parked_at is not None
            else f"next {entry.next_attempt_at.isoformat()}"
        )
        click.echo(
            f"{entry.slot_id}  tenant {entry.tenant_id}  {count_of(entry.attempts, 'attempt')}"
            f"  {when}  {entry.sqlstate}  {one_line(entry.message)}"
        )


def _print_ended(ended: tuple[EndedEntry, ...], json_output: bool) -> None:
    if json_output:
        click.echo(json.dumps([entry.as_json() for entry in ended]))
        return
    click.echo(f"{count_of(len(ended), 'entry', 'entries')} ended, the latest first")
    for entry in ended:
        how = "expired" if entry.expired else f"left Available: {entry.ended_status}"
        parked = f" (parked since {entry.parked_at.isoformat()})" if entry.parked_at else ""
        click.echo(
            f"{entry.slot_id}  tenant {entry.tenant_id}  ended {entry.ended_at.isoformat()}: "
            f"{how}{parked}  after {count_of(entry.attempts, 'attempt')}  {entry.sqlstate}  "
            f"{one_line(entry.message)}"
        )
