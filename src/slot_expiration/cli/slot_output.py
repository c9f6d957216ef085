"""How the `slots` commands print slots: one line each, or JSON for scripts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

from slot_expiration.domain import Slot
from slot_expiration.slots import ShowcaseCursor, ShowcasePage


def slot_json(slot: Slot) -> dict[str, Any]:
    return {
        "id": str(slot.id),
        "tenant_id": str(slot.tenant_id),
        "consultant_id": str(slot.consultant_id),
        "start_at": slot.start_at.isoformat(),
        "end_at": slot.end_at.isoformat(),
        "status": slot.status.value,
        "version": slot.version,
        "created_at": slot.created_at.isoformat(),
        "updated_at": slot.updated_at.isoformat(),
    }


def slot_line(slot: Slot) -> str:
    return (
        f"{slot.id}  {slot.start_at.isoformat()}/{slot.end_at.isoformat()}  "
        f"{slot.status.value:<9}  v{slot.version}  consultant {slot.consultant_id}"
    )


def echo_slot(slot: Slot, json_output: bool, headline: str) -> None:
    if json_output:
        click.echo(json.dumps(slot_json(slot)))
    else:
        click.echo(f"{headline}: {slot_line(slot)}")


def echo_slots(slots: Sequence[Slot], json_output: bool, headline: str) -> None:
    if json_output:
        click.echo(json.dumps([slot_json(slot) for slot in slots]))
        return
    click.echo(headline)
    for slot in slots:
        click.echo(f"  {slot_line(slot)}")


def echo_page(page: ShowcasePage, json_output: bool) -> None:
    """With --json, each slot carries the cursor that continues after it."""
    if json_output:
        items = [
            slot_json(slot) | {"cursor": ShowcaseCursor.after(slot).encode()} for slot in page.slots
        ]
        click.echo(json.dumps(items))
        return
    click.echo(f"{len(page.slots)} bookable slot(s)")
    for slot in page.slots:
        click.echo(f"  {slot_line(slot)}")
    if page.next_cursor is not None:
        click.echo(f"more: --after {page.next_cursor.encode()}")
