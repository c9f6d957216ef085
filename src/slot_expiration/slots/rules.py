"""The slot context's rules that need no database: publication limits and lead time."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from slot_expiration.domain import SlotStatus, sources_of
from slot_expiration.slots.errors import (
    BatchTooLargeError,
    BeyondHorizonError,
    EmptyBatchError,
    InvalidRangeError,
    SlotOverlapError,
    SlotTooLongError,
    StartNotInFutureError,
)
from slot_expiration.slots.ranges import SlotRange, overlaps_within

MAX_BATCH_SLOTS: Final = 500
"""ADR-0064: one publication holds at most this many slots."""

MAX_SLOT_DURATION: Final = timedelta(hours=24)
"""A slot is one consultation window; one lasting more than a day is a typo in a date
(an operator published a 111-day slot), and it would hide the consultant's whole
calendar behind a single booking. Elapsed time: the ends are instants."""

OCCUPYING: Final = frozenset({SlotStatus.AVAILABLE, SlotStatus.BOOKED})
"""INV-SLT-2: the statuses in which a slot takes its consultant's time. Expired and
Archived slots never block a new publication."""

BOOKABLE: Final = sources_of(SlotStatus.BOOKED)
"""What the public showcase lists: the statuses book-slot can start from."""

DEFAULT_HORIZON: Final = timedelta(days=90)
"""ADR-0064: how far ahead a slot may be published, unless --horizon-days says otherwise."""

DEFAULT_MIN_LEAD_TIME: Final = timedelta(minutes=60)
"""How soon before its start a slot can still be booked, unless --min-lead-time-minutes
says otherwise."""


@dataclass(frozen=True, slots=True)
class SlotPolicy:
    """The tunable rules: how far ahead slots may be published, how soon before its
    start a slot can still be booked (and is still shown)."""

    horizon: timedelta = DEFAULT_HORIZON
    min_lead_time: timedelta = DEFAULT_MIN_LEAD_TIME

    def earliest_bookable_start(self, now: datetime, min_lead_time: timedelta | None) -> datetime:
        """A slot can be booked (and is shown) if it starts at this moment or later."""
        return now + (self.min_lead_time if min_lead_time is None else min_lead_time)


def check_publication(batch: Sequence[SlotRange], now: datetime, horizon: timedelta) -> None:
    """Raise the first rule the batch breaks, naming every slot that breaks it.

    In order: the batch size (1..500), each range, each length (at most
    MAX_SLOT_DURATION), starting after `now`, starting within the horizon, then
    overlaps inside the batch. The overlaps with slots already published need
    the database (see the operations).
    """
    if not batch:
        raise EmptyBatchError
    if len(batch) > MAX_BATCH_SLOTS:
        raise BatchTooLargeError(len(batch), MAX_BATCH_SLOTS)
    numbered = list(enumerate(batch, start=1))
    if inverted := [(i, slot) for i, slot in numbered if slot.end_at <= slot.start_at]:
        raise InvalidRangeError(inverted)
    if too_long := [(i, slot) for i, slot in numbered if slot.length > MAX_SLOT_DURATION]:
        raise SlotTooLongError(too_long, MAX_SLOT_DURATION)
    if early := [(i, slot) for i, slot in numbered if slot.start_at <= now]:
        raise StartNotInFutureError(early, now)
    latest_start = now + horizon
    if late := [(i, slot) for i, slot in numbered if slot.start_at > latest_start]:
        raise BeyondHorizonError(late, latest_start)
    if conflicts := overlaps_within(batch):
        raise SlotOverlapError(conflicts)
