"""The database kernel: the one place that connects, runs named statements, bounds and
shields transactions, and translates the driver's errors. Each concern (expiry,
quarantine, history, status, slots, schema) owns its repository and its SQL above it."""

from slot_expiration.db.errors import (
    CommitInDoubtError,
    ErrorFamily,
    MisconfiguredStoreError,
    NotQuarantinedError,
    RowRejectedError,
    SchemaMissingError,
    StoreError,
    TransientStoreError,
)
from slot_expiration.db.session import (
    ApplicationName,
    CommittedThenCancelled,
    Transaction,
    TransactionLimits,
)

__all__ = [
    "ApplicationName",
    "CommitInDoubtError",
    "CommittedThenCancelled",
    "ErrorFamily",
    "MisconfiguredStoreError",
    "NotQuarantinedError",
    "RowRejectedError",
    "SchemaMissingError",
    "StoreError",
    "Transaction",
    "TransactionLimits",
    "TransientStoreError",
]
