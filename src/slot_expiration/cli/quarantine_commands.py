"""`slot-expiration quarantine`: the poison rows the worker passes over, and retrying them
at once after the data was fixed."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from uuid import UUID

import click

from slot_expiration.cli.common import database_url_option, guarded, options_from, required_url
from slot_expiration.cli.errors import ExitCode, fail
from slot_expiration.domain import utc_now
from slot_expiration.options import WorkerOptions
from slot_expiration.status.report import STATUS_APPLICATION_NAME
from slot_expiration.store.status_store import FailedSlot, StatusStore
from slot_expiration.worker import store_factory


@click.group()
def quarantine() -> None:
    """Slots the database keeps rejecting: passed over until their next attempt."""


@quarantine.command(name="list")
@database_url_option
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True,
              help="Show at most this many.")  # fmt: skip
@click.option("--json", "json_output", is_flag=True, help="Print one JSON array.")
def list_command(database_url: str | None, limit: int, json_output: bool) -> None:
    """Quarantined slots still Available, the latest failure first: attempts, next attempt,
    the database's reason."""
    options = options_from(database_url=database_url)
    required_url(options)
    total, entries = guarded(lambda: asyncio.run(_list(options, limit)), options)
    if json_output:
        click.echo(json.dumps([_as_json(entry) for entry in entries]))
        return
    click.echo(f"{total} slot(s) in quarantine, still Available (the latest {len(entries)} below)")
    for entry in entries:
        click.echo(
            f"{entry.slot_id}  attempts {entry.attempts}  next {entry.next_attempt_at.isoformat()}"
            f"  {entry.sqlstate}  {entry.message}"
        )


@quarantine.command()
@click.argument("slot_ids", nargs=-1, type=click.UUID)
@click.option("--all", "every", is_flag=True, help="Retry every quarantined slot.")
@database_url_option
def retry(slot_ids: tuple[UUID, ...], every: bool, database_url: str | None) -> None:
    """Make quarantined slots due now: the worker's next cycle tries them again."""
    if bool(slot_ids) == every:
        fail("give slot ids or --all (not both)", ExitCode.USAGE)
    options = options_from(database_url=database_url)
    required_url(options)
    found = guarded(lambda: asyncio.run(_retry(options, slot_ids, every)), options)
    click.echo(f"{len(found)} quarantined slot(s) due now; the next cycle retries them")


async def _list(options: WorkerOptions, limit: int) -> tuple[int, tuple[FailedSlot, ...]]:
    async with StatusStore.connect(
        options.require_database_url(), STATUS_APPLICATION_NAME
    ) as store:
        return await store.failed_slots(limit)


async def _retry(options: WorkerOptions, slot_ids: tuple[UUID, ...], every: bool) -> list[UUID]:
    async with store_factory(options)() as store, store.transaction():
        return await store.retry_quarantined(slot_ids, utc_now(), every=every)


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
