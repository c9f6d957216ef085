"""The one state machine of an availability slot.

    Available -> Booked     (book-slot)
    Available -> Expired    (this worker)
    Available -> Archived   (an agent cleans up)
    Expired   -> Archived   (an agent cleans up)
    Booked and Archived: nothing further here (a Booked slot's fate belongs to
    its appointment; Archived is terminal).

Every write moves `version` up by exactly one and sets `updated_at`. The slot
context's operations (slot_expiration.slots) guard their one conditional
UPDATE with `sources_of(target)`, passed as a parameter, and explain a refusal
with `require_transition`. The worker's SQL spells its transition
(Available -> Expired) as literals so the planner can use the index; a test
checks those literals against `EXPIRE` here.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, Final
from uuid import UUID

from slot_expiration.domain.slot import SlotStatus


class SlotRuleError(Exception):
    """A request the slot's rules refuse (a guard, an overlap, a forbidden transition).

    `code` is stable (`CAL_SLOT_*`): callers and scripts branch on it, never on
    the message. Nothing was written when one is raised.
    """

    code: ClassVar[str]

    def describe(self) -> str:
        """One line: the code first, then what was refused."""
        return f"{self.code}: {self}"


_ALLOWED: Final = MappingProxyType(
    {
        SlotStatus.AVAILABLE: frozenset(
            {SlotStatus.BOOKED, SlotStatus.EXPIRED, SlotStatus.ARCHIVED}
        ),
        SlotStatus.EXPIRED: frozenset({SlotStatus.ARCHIVED}),
        SlotStatus.BOOKED: frozenset[SlotStatus](),
        SlotStatus.ARCHIVED: frozenset[SlotStatus](),
    }
)


@dataclass(frozen=True, slots=True)
class Transition:
    source: SlotStatus
    target: SlotStatus


class ForbiddenTransitionError(SlotRuleError, ValueError):
    """A transition the state machine does not allow; never a silent no-op."""

    code: ClassVar[str] = "CAL_SLOT_FORBIDDEN_TRANSITION"

    def __init__(self, source: SlotStatus, target: SlotStatus, slot_id: UUID | None = None) -> None:
        which = f"slot {slot_id}" if slot_id is not None else "a slot"
        super().__init__(f"{which} cannot go from {source.value} to {target.value}")
        self.source = source
        self.target = target
        self.slot_id = slot_id


def allowed_targets(source: SlotStatus) -> frozenset[SlotStatus]:
    return _ALLOWED[source]


def sources_of(target: SlotStatus) -> frozenset[SlotStatus]:
    """Every status a slot may be in to move to `target`."""
    return frozenset(source for source, targets in _ALLOWED.items() if target in targets)


def is_terminal(status: SlotStatus) -> bool:
    return not _ALLOWED[status]


def require_transition(
    source: SlotStatus, target: SlotStatus, slot_id: UUID | None = None
) -> Transition:
    """The transition source -> target, or ForbiddenTransitionError (naming `slot_id`)."""
    if target not in _ALLOWED[source]:
        raise ForbiddenTransitionError(source, target, slot_id)
    return Transition(source, target)


EXPIRE: Final = require_transition(SlotStatus.AVAILABLE, SlotStatus.EXPIRED)
BOOK: Final = require_transition(SlotStatus.AVAILABLE, SlotStatus.BOOKED)
