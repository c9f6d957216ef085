"""The quarantine of poison rows: the rows the database rejects are expired one by one so
the rest of their batch commits (row_by_row), recorded and passed over until their next
attempt (backoff), in slot_expiration_failures (store, quarantine.sql); `slot-expiration
quarantine` lists, parks and retries them."""

from slot_expiration.quarantine.backoff import PoisonBackoff
from slot_expiration.quarantine.row_by_row import ItemFailure, RowByRow, RowByRowOutcome
from slot_expiration.quarantine.store import (
    EndedEntry,
    FailedSlot,
    ListingFilter,
    QuarantineEntry,
    QuarantineGauges,
    QuarantineListing,
    QuarantineStore,
)

__all__ = [
    "EndedEntry",
    "FailedSlot",
    "ItemFailure",
    "ListingFilter",
    "PoisonBackoff",
    "QuarantineEntry",
    "QuarantineGauges",
    "QuarantineListing",
    "QuarantineStore",
    "RowByRow",
    "RowByRowOutcome",
]
