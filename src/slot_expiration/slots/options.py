"""The slot context's options: validated objects, units in the names, each a flag and a
SLOT_EXPIRATION_* variable. Each command reads only the model of what it uses: `publish`
the horizon, `book` and `showcase` the lead time, `list` and `archive` neither, so a
bad value of one never breaks a command that does not read it."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import Field

from slot_expiration.options import DatabaseOptions
from slot_expiration.options.settings import Days, Minutes
from slot_expiration.slots.rules import DEFAULT_HORIZON, DEFAULT_MIN_LEAD_TIME, SlotPolicy


class PublicationOptions(DatabaseOptions):
    """`slots publish`: how far ahead a slot may start."""

    horizon_days: Annotated[
        Days,
        Field(
            ge=1,
            le=3_650,
            description="How far ahead a published slot may start, in days (ADR-0064).",
        ),
    ] = DEFAULT_HORIZON.days

    def policy(self) -> SlotPolicy:
        return SlotPolicy(horizon=timedelta(days=self.horizon_days))


class BookingOptions(DatabaseOptions):
    """`slots book` and `slots showcase`: how soon before its start a slot is bookable."""

    min_lead_time_minutes: Annotated[
        Minutes,
        Field(
            ge=0,
            le=525_600,
            description="Book-slot refuses, and the showcase hides, slots starting sooner "
            "than this from now; 0 allowed.",
        ),
    ] = DEFAULT_MIN_LEAD_TIME // timedelta(minutes=1)

    def policy(self) -> SlotPolicy:
        return SlotPolicy(min_lead_time=timedelta(minutes=self.min_lead_time_minutes))


class SlotOptions(PublicationOptions, BookingOptions):
    """Every option of the slot context (the Python API's, and the table of docs/options.md)."""

    def policy(self) -> SlotPolicy:
        return SlotPolicy(
            horizon=timedelta(days=self.horizon_days),
            min_lead_time=timedelta(minutes=self.min_lead_time_minutes),
        )
