"""The slot context's options: one validated object, units in the names, each a flag
and a SLOT_EXPIRATION_* variable."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import Field

from slot_expiration.options import DatabaseOptions
from slot_expiration.slots.rules import SlotPolicy


class SlotOptions(DatabaseOptions):
    horizon_days: Annotated[
        int,
        Field(
            ge=1,
            le=3_650,
            description="How far ahead a published slot may start, in days (ADR-0064).",
        ),
    ] = 90
    min_lead_time_minutes: Annotated[
        int,
        Field(
            ge=0,
            le=525_600,
            description="Book-slot refuses, and the showcase hides, slots starting sooner "
            "than this from now; 0 allowed.",
        ),
    ] = 60

    def policy(self) -> SlotPolicy:
        return SlotPolicy(
            horizon=timedelta(days=self.horizon_days),
            min_lead_time=timedelta(minutes=self.min_lead_time_minutes),
        )
