"""PostgreSQL: sessions, named statements, the repositories, their errors, the migrations."""

from slot_expiration.store.errors import (
    CommitInDoubtError,
    ErrorFamily,
    MisconfiguredStoreError,
    NotQuarantinedError,
    RowRejectedError,
    SchemaMissingError,
    SlotStoreError,
    TransientStoreError,
)
from slot_expiration.store.quarantine_store import FailedSlot, QuarantineEntry, QuarantineStore
from slot_expiration.store.session import ApplicationName, Transaction, TransactionLimits
from slot_expiration.store.slot_store import LockedBatch, Position, Preflight, Selection, SlotStore

__all__ = [
    "ApplicationName",
    "CommitInDoubtError",
    "ErrorFamily",
    "FailedSlot",
    "LockedBatch",
    "MisconfiguredStoreError",
    "NotQuarantinedError",
    "Position",
    "Preflight",
    "QuarantineEntry",
    "QuarantineStore",
    "RowRejectedError",
    "SchemaMissingError",
    "Selection",
    "SlotStore",
    "SlotStoreError",
    "Transaction",
    "TransactionLimits",
    "TransientStoreError",
]
