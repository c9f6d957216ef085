"""PostgreSQL: sessions, named statements, the repositories, their errors, the migrations."""

from slot_expiration.store.cycle_store import (
    CycleStore,
    LockedBatch,
    Position,
    Preflight,
    Problem,
    Selection,
)
from slot_expiration.store.errors import (
    CommitInDoubtError,
    ErrorFamily,
    MisconfiguredStoreError,
    NotQuarantinedError,
    RowRejectedError,
    SchemaMissingError,
    StoreError,
    TransientStoreError,
)
from slot_expiration.store.session import ApplicationName, Transaction, TransactionLimits

__all__ = [
    "ApplicationName",
    "CommitInDoubtError",
    "CycleStore",
    "ErrorFamily",
    "LockedBatch",
    "MisconfiguredStoreError",
    "NotQuarantinedError",
    "Position",
    "Preflight",
    "Problem",
    "RowRejectedError",
    "SchemaMissingError",
    "Selection",
    "StoreError",
    "Transaction",
    "TransactionLimits",
    "TransientStoreError",
]
