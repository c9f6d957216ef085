"""What the read operations take and give: time windows, pages, the agent's default view."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from slot_expiration.domain import Slot
from slot_expiration.slots.cursor import ShowcaseCursor
from slot_expiration.slots.rules import OCCUPYING

WORKING_VIEW: Final = OCCUPYING
"""The agent list's default: the slots that still matter (Available, Booked)."""

DEFAULT_PAGE_SIZE: Final = 50
MAX_PAGE_SIZE: Final = 500


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """Slots starting in [start_from, start_before); an open side when None."""

    start_from: datetime | None = None
    start_before: datetime | None = None


@dataclass(frozen=True, slots=True)
class PageRequest:
    """A page of the showcase: at most `limit` slots after `after` (None: from the start)."""

    limit: int = DEFAULT_PAGE_SIZE
    after: ShowcaseCursor | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.limit <= MAX_PAGE_SIZE:
            raise ValueError(f"a page holds 1..{MAX_PAGE_SIZE} slots")


@dataclass(frozen=True, slots=True)
class ShowcasePage:
    """One page of the showcase; `next_cursor` is None on the last page."""

    slots: tuple[Slot, ...]
    next_cursor: ShowcaseCursor | None
