"""`slot-expiration slots`: the slot context's operations from the command line.

publish, book, showcase, list, archive. A rule rejection exits 3 with one
stderr line starting with its code (CAL_SLOT_*); wrong usage exits 2; a
database that cannot be used exits 1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, BinaryIO, TypeVar
from uuid import UUID

import click

from slot_expiration.cli.common import guarded, required_url, settings_from
from slot_expiration.cli.errors import ExitCode, fail
from slot_expiration.cli.option_flags import option, options
from slot_expiration.cli.slot_input import (
    MAX_FILE_BYTES,
    as_cursor,
    as_moment,
    as_slot_range,
    read_ranges,
)
from slot_expiration.cli.slot_output import echo_page, echo_slot, echo_slots
from slot_expiration.domain import SlotStatus
from slot_expiration.options import DatabaseOptions
from slot_expiration.slots import (
    DEFAULT_PAGE_SIZE,
    MAX_BATCH_SLOTS,
    MAX_PAGE_SIZE,
    MAX_SLOT_DURATION,
    BookingOptions,
    PageRequest,
    PublicationOptions,
    ShowcaseCursor,
    SlotOperations,
    SlotPolicy,
    SlotRange,
    TimeWindow,
)

T = TypeVar("T")

tenant_option = click.option(
    "--tenant", "tenant_id", type=click.UUID, required=True, help="The agency (tenant) id."
)
json_option = click.option("--json", "json_output", is_flag=True, help="Print one JSON document.")
lead_time_option = option(BookingOptions, "min_lead_time_minutes")
database_options = options(DatabaseOptions, "database_url", "schema")
from_option = click.option(
    "--from",
    "start_from",
    callback=as_moment,
    metavar="ISO",
    help="Only slots starting at or after this (ISO-8601).",
)
to_option = click.option(
    "--to",
    "start_before",
    callback=as_moment,
    metavar="ISO",
    help="Only slots starting before this (ISO-8601).",
)


def run_operation(
    settings: DatabaseOptions,
    operation: Callable[[SlotOperations], Awaitable[T]],
    policy: SlotPolicy | None = None,
) -> T:
    """Run one operation on a connection of its own; failures become one line. `policy`:
    the rules the command's options set (None: a command that reads none)."""
    url = required_url(settings)

    async def on_connection() -> T:
        async with SlotOperations.connect(url, policy or SlotPolicy()) as operations:
            return await operation(operations)

    return guarded(lambda: asyncio.run(on_connection()), settings)


@click.group()
def slots() -> None:
    """The slots around the worker: publish, book, showcase, list, archive.

    Exit status 3 means a rule refused the request (the stderr line starts with
    its CAL_SLOT_* code); nothing was written.
    """


@slots.command(
    help=f"Publish 1..{MAX_BATCH_SLOTS} slots for a consultant, all or nothing (no overlaps, "
    f"each at most {MAX_SLOT_DURATION.total_seconds() / 3600:g} hours long, within the horizon, "
    "starting in the future)."
)
@tenant_option
@click.option(
    "--consultant",
    "consultant_id",
    type=click.UUID,
    required=True,
    help="The consultant whose slots these are.",
)
@click.option(
    "--slot",
    "slot_ranges",
    callback=as_slot_range,
    multiple=True,
    metavar="START/END",
    help="A slot as START/END, ISO-8601 (no offset: UTC); repeat for more.",
)
@click.option(
    "--from-file",
    "from_file",
    type=click.File("rb"),
    help=f"A UTF-8 file of at most {MAX_FILE_BYTES // 1024**2} MiB, one START/END "
    "per line ('-' reads stdin).",
)
@option(PublicationOptions, "horizon_days")
@database_options
@json_option
def publish(
    tenant_id: UUID,
    consultant_id: UUID,
    slot_ranges: tuple[SlotRange, ...],
    from_file: BinaryIO | None,
    json_output: bool,
    **given: Any,
) -> None:
    if bool(slot_ranges) == (from_file is not None):
        fail(
            "give the slots with --slot START/END (repeatable) or --from-file PATH", ExitCode.USAGE
        )
    batch = list(slot_ranges) if from_file is None else read_ranges(from_file)
    settings = settings_from(PublicationOptions, **given)
    published = run_operation(
        settings,
        lambda operations: operations.publish(tenant_id, consultant_id, batch),
        settings.policy(),
    )
    echo_slots(published, json_output, f"published {len(published)} slot(s)")


@slots.command()
@click.argument("slot_id", type=click.UUID)
@tenant_option
@lead_time_option
@database_options
@json_option
def book(slot_id: UUID, tenant_id: UUID, json_output: bool, **given: Any) -> None:
    """Book an Available slot that starts at least the lead time from now."""
    settings = settings_from(BookingOptions, **given)
    booked = run_operation(
        settings, lambda operations: operations.book(tenant_id, slot_id), settings.policy()
    )
    echo_slot(booked, json_output, "booked")


@slots.command()
@tenant_option
@click.option(
    "--consultant", "consultant_id", type=click.UUID, help="Only this consultant's slots."
)
@from_option
@to_option
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_PAGE_SIZE),
    default=DEFAULT_PAGE_SIZE,
    show_default=True,
    help="Slots per page.",
)
@click.option(
    "--after",
    callback=as_cursor,
    metavar="CURSOR",
    help="The cursor of the previous page: the next page starts after it.",
)
@lead_time_option
@database_options
@json_option
def showcase(
    tenant_id: UUID,
    consultant_id: UUID | None,
    start_from: datetime | None,
    start_before: datetime | None,
    limit: int,
    after: ShowcaseCursor | None,
    json_output: bool,
    **given: Any,
) -> None:
    """The public showcase: bookable slots (Available, starting at least the lead time
    from now), by start, a page at a time.

    The text output ends with `more: --after CURSOR` when another page follows.
    With --json each slot carries its `cursor`: pass the last one to --after; a
    page shorter than --limit is the last.
    """
    settings = settings_from(BookingOptions, **given)
    window, page = TimeWindow(start_from, start_before), PageRequest(limit, after)
    shown = run_operation(
        settings,
        lambda operations: operations.showcase(
            tenant_id, consultant_id=consultant_id, window=window, page=page
        ),
        settings.policy(),
    )
    echo_page(shown, json_output)


@slots.command(name="list")
@tenant_option
@click.option(
    "--consultant",
    "consultant_id",
    type=click.UUID,
    required=True,
    help="The consultant whose slots to list.",
)
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice([s.value for s in SlotStatus], case_sensitive=False),
    help="Only these statuses (repeatable). [default: Available, Booked]",
)
@from_option
@to_option
@database_options
@json_option
def list_command(
    tenant_id: UUID,
    consultant_id: UUID,
    statuses: tuple[str, ...],
    start_from: datetime | None,
    start_before: datetime | None,
    json_output: bool,
    **given: Any,
) -> None:
    """An agent's view of one consultant's slots, by start: Available and Booked unless
    --status asks for others."""
    settings = settings_from(DatabaseOptions, **given)
    wanted = {SlotStatus(status) for status in statuses}
    listed = run_operation(
        settings,
        lambda operations: operations.list_slots(
            tenant_id,
            consultant_id,
            statuses=wanted,
            window=TimeWindow(start_from, start_before),
        ),
    )
    echo_slots(listed, json_output, f"{len(listed)} slot(s)")


@slots.command()
@click.argument("slot_id", type=click.UUID)
@tenant_option
@database_options
@json_option
def archive(slot_id: UUID, tenant_id: UUID, json_output: bool, **given: Any) -> None:
    """Archive an Available or Expired slot (an agent's clean-up)."""
    settings = settings_from(DatabaseOptions, **given)
    archived = run_operation(settings, lambda operations: operations.archive(tenant_id, slot_id))
    echo_slot(archived, json_output, "archived")
