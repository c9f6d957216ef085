"""The slot context around the worker: publish, book-slot, showcase, agent list, archive."""

from slot_expiration.domain import ForbiddenTransitionError, SlotRuleError
from slot_expiration.slots.cursor import InvalidCursorError, ShowcaseCursor
from slot_expiration.slots.errors import (
    RULE_ERRORS,
    BatchTooLargeError,
    BeyondHorizonError,
    EmptyBatchError,
    InvalidRangeError,
    LeadTimeViolationError,
    SlotNotAvailableError,
    SlotNotFoundError,
    SlotOverlapError,
    SlotTooLongError,
    StartNotInFutureError,
)
from slot_expiration.slots.operations import SlotOperations
from slot_expiration.slots.options import BookingOptions, PublicationOptions, SlotOptions
from slot_expiration.slots.ranges import OverlapConflict, SlotRange
from slot_expiration.slots.rules import (
    BOOKABLE,
    MAX_BATCH_SLOTS,
    MAX_SLOT_DURATION,
    OCCUPYING,
    SlotPolicy,
)
from slot_expiration.slots.views import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    WORKING_VIEW,
    PageRequest,
    ShowcasePage,
    TimeWindow,
)

__all__ = [
    "BOOKABLE",
    "DEFAULT_PAGE_SIZE",
    "MAX_BATCH_SLOTS",
    "MAX_PAGE_SIZE",
    "MAX_SLOT_DURATION",
    "OCCUPYING",
    "RULE_ERRORS",
    "WORKING_VIEW",
    "BatchTooLargeError",
    "BeyondHorizonError",
    "BookingOptions",
    "EmptyBatchError",
    "ForbiddenTransitionError",
    "InvalidCursorError",
    "InvalidRangeError",
    "LeadTimeViolationError",
    "OverlapConflict",
    "PageRequest",
    "PublicationOptions",
    "ShowcaseCursor",
    "ShowcasePage",
    "SlotNotAvailableError",
    "SlotNotFoundError",
    "SlotOperations",
    "SlotOptions",
    "SlotOverlapError",
    "SlotPolicy",
    "SlotRange",
    "SlotRuleError",
    "SlotTooLongError",
    "StartNotInFutureError",
    "TimeWindow",
]
