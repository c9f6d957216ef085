"""The slot context's rule rejections, each with its stable `CAL_SLOT_*` code.

Messages are one line. A slot of another tenant is described exactly like an
unknown id, so a refusal never tells a tenant that someone else's slot exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import ClassVar
from uuid import UUID

from slot_expiration.domain import ForbiddenTransitionError, SlotRuleError, SlotStatus
from slot_expiration.slots.ranges import OverlapConflict, SlotRange


class SlotNotAvailableError(SlotRuleError):
    """Book-slot: the slot is not Available, or the tenant has no such slot."""

    code: ClassVar[str] = "CAL_SLOT_NOT_AVAILABLE"

    def __init__(self, slot_id: UUID, status: SlotStatus | None = None) -> None:
        # `status` only for the tenant's own slot; None says nothing about existence.
        detail = f": it is {status.value}" if status is not None else ""
        super().__init__(f"slot {slot_id} is not available for booking{detail}")
        self.slot_id = slot_id
        self.status = status


class SlotNotFoundError(SlotRuleError):
    """The tenant has no slot with this id (unknown, or another tenant's)."""

    code: ClassVar[str] = "CAL_SLOT_NOT_FOUND"

    def __init__(self, slot_id: UUID) -> None:
        super().__init__(f"no slot {slot_id} for this tenant")
        self.slot_id = slot_id


class LeadTimeViolationError(SlotRuleError):
    """Book-slot: the slot starts sooner than the minimum lead time from now."""

    code: ClassVar[str] = "CAL_SLOT_LEAD_TIME_VIOLATION"

    def __init__(self, slot_id: UUID, start_at: datetime, min_lead_time: timedelta) -> None:
        minutes = int(min_lead_time.total_seconds() // 60)
        super().__init__(
            f"slot {slot_id} starts at {start_at.isoformat()}, less than {minutes} minutes from now"
        )
        self.slot_id = slot_id
        self.start_at = start_at
        self.min_lead_time = min_lead_time


class EmptyBatchError(SlotRuleError):
    code: ClassVar[str] = "CAL_SLOT_BATCH_EMPTY"

    def __init__(self) -> None:
        super().__init__("a publication needs at least one slot")


class BatchTooLargeError(SlotRuleError):
    code: ClassVar[str] = "CAL_SLOT_BATCH_TOO_LARGE"

    def __init__(self, count: int, limit: int) -> None:
        super().__init__(f"{count} slots in one publication; at most {limit} are allowed")
        self.count = count
        self.limit = limit


def _positions(slots: Sequence[tuple[int, SlotRange]]) -> str:
    return ", ".join(f"#{position} {slot.describe()}" for position, slot in slots)


class InvalidRangeError(SlotRuleError):
    """Slots whose end is not after their start."""

    code: ClassVar[str] = "CAL_SLOT_INVALID_RANGE"

    def __init__(self, slots: Sequence[tuple[int, SlotRange]]) -> None:
        super().__init__(f"a slot must end after it starts: {_positions(slots)}")
        self.slots = tuple(slots)


class SlotTooLongError(SlotRuleError):
    """Slots that last longer than one consultation window may."""

    code: ClassVar[str] = "CAL_SLOT_TOO_LONG"

    def __init__(self, slots: Sequence[tuple[int, SlotRange]], longest: timedelta) -> None:
        super().__init__(f"a slot may last at most {_duration(longest)}: {_positions(slots)}")
        self.slots = tuple(slots)
        self.longest = longest


def _duration(length: timedelta) -> str:
    hours, seconds = divmod(int(length.total_seconds()), 3600)
    return f"{hours} hours" if not seconds else f"{length}"


class StartNotInFutureError(SlotRuleError):
    """Slots that do not start after the moment of publication."""

    code: ClassVar[str] = "CAL_SLOT_START_IN_PAST"

    def __init__(self, slots: Sequence[tuple[int, SlotRange]], now: datetime) -> None:
        super().__init__(f"a slot must start after now ({now.isoformat()}): {_positions(slots)}")
        self.slots = tuple(slots)


class BeyondHorizonError(SlotRuleError):
    """Slots that start later than the publication horizon allows."""

    code: ClassVar[str] = "CAL_SLOT_BEYOND_HORIZON"

    def __init__(self, slots: Sequence[tuple[int, SlotRange]], latest_start: datetime) -> None:
        super().__init__(
            f"a slot must start by {latest_start.isoformat()} (the horizon): {_positions(slots)}"
        )
        self.slots = tuple(slots)
        self.latest_start = latest_start


class SlotOverlapError(SlotRuleError):
    """INV-SLT-2: the batch overlaps itself or the consultant's Available/Booked slots."""

    code: ClassVar[str] = "CAL_SLOT_OVERLAP"

    def __init__(self, conflicts: Sequence[OverlapConflict]) -> None:
        described = "; ".join(conflict.describe() for conflict in conflicts)
        super().__init__(f"{len(conflicts)} overlap(s), nothing published: {described}")
        self.conflicts = tuple(conflicts)


RULE_ERRORS: tuple[type[SlotRuleError], ...] = (
    SlotNotAvailableError,
    LeadTimeViolationError,
    SlotNotFoundError,
    EmptyBatchError,
    BatchTooLargeError,
    InvalidRangeError,
    SlotTooLongError,
    StartNotInFutureError,
    BeyondHorizonError,
    SlotOverlapError,
    ForbiddenTransitionError,
)
"""Every rule rejection the slot context raises (docs/slot-context.md lists their codes)."""
