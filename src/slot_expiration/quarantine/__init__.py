"""The quarantine of poison rows: the rows the database rejected (the cycle's row-by-row
path, expiry/row_by_row.py), recorded and passed over until their next attempt (backoff),
in slot_expiration_failures (store, quarantine.sql); `slot-expiration quarantine` lists,
parks and retries them."""

from slot_expiration.quarantine.backoff import PoisonBackoff
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
    "ListingFilter",
    "PoisonBackoff",
    "QuarantineEntry",
    "QuarantineGauges",
    "QuarantineListing",
    "QuarantineStore",
]
