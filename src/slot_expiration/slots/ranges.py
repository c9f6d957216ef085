"""When slots are, and which of them overlap (INV-SLT-2), as pure functions."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from slot_expiration.domain import Slot, SlotStatus


@dataclass(frozen=True, slots=True)
class SlotRange:
    """When a slot is: [start_at, end_at), both timezone-aware."""

    start_at: datetime
    end_at: datetime

    def __post_init__(self) -> None:
        if self.start_at.tzinfo is None or self.end_at.tzinfo is None:
            raise ValueError("a slot's start and end must carry a time zone")

    @property
    def length(self) -> timedelta:
        return self.end_at - self.start_at

    def overlaps(self, other: SlotRange) -> bool:
        """Half-open ranges: a slot ending at 10:00 does not overlap one starting at 10:00."""
        return self.start_at < other.end_at and other.start_at < self.end_at

    def describe(self) -> str:
        return f"{self.start_at.isoformat()}/{self.end_at.isoformat()}"


@dataclass(frozen=True, slots=True)
class OverlapConflict:
    """A slot of a batch (1-based `position`) that overlaps another slot: one of the same
    batch (`other_position`) or one already published (`existing_id`)."""

    position: int
    slot: SlotRange
    other: SlotRange
    other_position: int | None = None
    existing_id: UUID | None = None
    existing_status: SlotStatus | None = None

    def describe(self) -> str:
        mine = f"#{self.position} {self.slot.describe()}"
        if self.existing_id is not None:
            status = self.existing_status.value if self.existing_status else "?"
            return f"{mine} overlaps slot {self.existing_id} ({status} {self.other.describe()})"
        return f"{mine} overlaps #{self.other_position} {self.other.describe()} of the batch"


def _by_start(slots: Sequence[SlotRange]) -> list[tuple[int, SlotRange]]:
    return sorted(enumerate(slots, start=1), key=lambda pair: (pair[1].start_at, pair[0]))


def overlaps_within(batch: Sequence[SlotRange]) -> list[OverlapConflict]:
    """Every overlapping pair of the batch, once each (the earlier position first).

    A sweep in start order: each slot is compared only with those that start
    before it ends, so a batch without overlaps costs one sort.
    """
    ordered = _by_start(batch)
    conflicts: list[OverlapConflict] = []
    for index, (position, slot) in enumerate(ordered):
        for other_position, other in ordered[index + 1 :]:
            if other.start_at >= slot.end_at:
                break
            first, second = sorted(((position, slot), (other_position, other)))
            conflicts.append(OverlapConflict(first[0], first[1], second[1], second[0]))
    return sorted(conflicts, key=lambda c: (c.position, c.other_position or 0))


def overlaps_with(batch: Sequence[SlotRange], existing: Sequence[Slot]) -> list[OverlapConflict]:
    """Every (batch slot, existing slot) pair that overlaps, in batch order.

    `existing` are the consultant's slots that occupy time (Available, Booked)
    around the batch. An existing slot can only overlap a batch slot if it
    starts within the longest existing slot's length before that slot's start,
    so each batch slot looks at that window of the start-sorted list only.
    """
    others = sorted(existing, key=lambda slot: (slot.start_at, slot.id))
    if not others:
        return []
    starts = [other.start_at for other in others]
    longest = max(other.end_at - other.start_at for other in others)
    conflicts: list[OverlapConflict] = []
    for position, slot in enumerate(batch, start=1):
        first = bisect_right(starts, slot.start_at - longest)
        last = bisect_left(starts, slot.end_at)
        conflicts.extend(
            OverlapConflict(
                position,
                slot,
                SlotRange(other.start_at, other.end_at),
                existing_id=other.id,
                existing_status=other.status,
            )
            for other in others[first:last]
            if other.end_at > slot.start_at
        )
    return conflicts
