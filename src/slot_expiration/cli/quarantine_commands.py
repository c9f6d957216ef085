"""`slot-expiration quarantine`: the poison rows the worker passes over, and retrying them
at once after the data was fixed."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from uuid import UUID

import click

from slot_expiration.cli.common import guarded, required_url, settings_from
from slot_expiration.cli.errors import ExitCode, fail
from slot_expiration.cli.option_flags import option
from slot_expiration.domain import utc_now
from slot_expiration.options import DatabaseOptions
from slot_expiration.store import (
    ApplicationName,
    FailedSlot,
    QuarantineStore,
    TransactionLimits,
)
from slot_expiration.store.status_store import StatusStore

# An operator's retry is one short statement: it must not wait long behind a cycle's lock.
RETRY_LIMITS = TransactionLimits(statement_timeout_ms=10_000, lock_timeout_ms=2_000)


@click.group()
def quarantine() -> None:
    """Slots the database keeps rejecting: passed over until their next attempt."""


@quarantine.command(name="list")
@option(DatabaseOptions, "database_url")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True,
              help="Show at most this many.")  # fmt: skip
@click.option("--json", "json_output", is_flag=True, help="Print one JSON array.")
def list_command(database_url: str | None, limit: int, json_output: bool) -> None:
    """Quarantined slots still Available, the latest failure first: attempts, next attempt,
    the database's reason. Reads only."""
    settings = settings_from(DatabaseOptions, database_url=database_url)
    url = required_url(settings)
    total, entries = guarded(lambda: asyncio.run(_list(url, limit)), settings)
    if json_output:
        click.echo(json.dumps([_as_json(entry) for entry in entries]))
        return
    shown = f" (the latest {len(entries)} below)" if entries else ""
    click.echo(f"{total} slot(s) in quarantine, still Available{shown}")
    for entry in entries:
        click.echo(
            f"{entry.slot_id}  attempts {entry.attempts}  next {entry.next_attempt_at.isoformat()}"
            f"  {entry.sqlstate}  {entry.message}"
        )


@quarantine.command()
@click.argument("slot_ids", nargs=-1, type=click.UUID)
@click.option("--all", "every", is_flag=True, help="Retry every quarantined slot.")
@option(DatabaseOptions, "database_url")
def retry(slot_ids: tuple[UUID, ...], every: bool, database_url: str | None) -> None:
    """Make quarantined slots due now: the worker's next cycle tries them again."""
    if bool(slot_ids) == every:
        fail("give slot ids or --all (not both)", ExitCode.USAGE)
    settings = settings_from(DatabaseOptions, database_url=database_url)
    url = required_url(settings)
    found = guarded(lambda: asyncio.run(_retry(url, slot_ids, every)), settings)
    click.echo(f"{len(found)} quarantined slot(s) due now; the next cycle retries them")


async def _list(url: str, limit: int) -> tuple[int, tuple[FailedSlot, ...]]:
    async with StatusStore.connect(url, ApplicationName.STATUS) as store:
        return await store.quarantine.listing(limit)


async def _retry(url: str, slot_ids: tuple[UUID, ...], every: bool) -> list[UUID]:
    async with QuarantineStore.connect(url, RETRY_LIMITS) as store:
        return await store.retry(slot_ids, utc_now(), every=every)


def _as_json(entry: FailedSlot) -> dict[str, Any]:
    return {
        "slot_id": str(entry.slot_id),
        "tenant_id": str(entry.tenant_id),
        "attempts": entry.attempts,
        "first_failed_at": entry.first_failed_at.isoformat(),
        "last_failed_at": entry.last_failed_at.isoformat(),
        "next_attempt_at": entry.next_attempt_at.isoformat(),
        "sqlstate": entry.sqlstate,
        "message": entry.message,
    }
