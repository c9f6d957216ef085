"""PostgreSQL: named statements, the slot store, its errors and the migrations."""

from slot_expiration.store.errors import (
    RowRejectedError,
    SchemaMissingError,
    SlotStoreError,
    StoreConnectError,
    StoreUnavailableError,
)
from slot_expiration.store.slot_store import (
    LockedBatch,
    QuarantineEntry,
    SessionLimits,
    SlotStore,
)

__all__ = [
    "LockedBatch",
    "QuarantineEntry",
    "RowRejectedError",
    "SchemaMissingError",
    "SessionLimits",
    "SlotStore",
    "SlotStoreError",
    "StoreConnectError",
    "StoreUnavailableError",
]
