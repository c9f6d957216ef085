"""The slot as a value (its row, identity, status and the one state machine), and how a
cycle of the worker ended."""

from slot_expiration.domain.clock import utc_now
from slot_expiration.domain.lifecycle import (
    BOOK,
    EXPIRE,
    ForbiddenTransitionError,
    SlotRuleError,
    Transition,
    allowed_targets,
    is_terminal,
    require_transition,
    sources_of,
)
from slot_expiration.domain.outcome import CycleOutcome
from slot_expiration.domain.slot import Slot, SlotRef, SlotStatus

__all__ = [
    "BOOK",
    "EXPIRE",
    "CycleOutcome",
    "ForbiddenTransitionError",
    "Slot",
    "SlotRef",
    "SlotRuleError",
    "SlotStatus",
    "Transition",
    "allowed_targets",
    "is_terminal",
    "require_transition",
    "sources_of",
    "utc_now",
]
