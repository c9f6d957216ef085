"""PostgreSQL: named statements, the slot store, its errors and the migrations."""

from slot_expiration.store.errors import (
    CommitInDoubtError,
    NotQuarantinedError,
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
    "CommitInDoubtError",
    "LockedBatch",
    "NotQuarantinedError",
    "QuarantineEntry",
    "RowRejectedError",
    "SchemaMissingError",
    "SessionLimits",
    "SlotStore",
    "SlotStoreError",
    "StoreConnectError",
    "StoreUnavailableError",
]
