"""One cycle of the worker: one batch (or, draining, several), one result."""

from slot_expiration.cycle.backoff import PoisonBackoff
from slot_expiration.cycle.expiry_cycle import ExpiryCycle, StoreFactory, misconfigured
from slot_expiration.cycle.failure import (
    ClockSkewError,
    CycleCancelledError,
    FailureKind,
    failure_kind,
    sqlstate_of,
)
from slot_expiration.cycle.limits import CycleLimits
from slot_expiration.cycle.result import (
    BACKLOG_COUNT_CAP,
    FAILED_SAMPLE_SIZE,
    BatchResult,
    CycleResult,
    CycleTally,
    ItemFailure,
    StopReason,
)
from slot_expiration.cycle.run import BatchObserver, CycleRun, NoBatchObserver

__all__ = [
    "BACKLOG_COUNT_CAP",
    "FAILED_SAMPLE_SIZE",
    "BatchObserver",
    "BatchResult",
    "ClockSkewError",
    "CycleCancelledError",
    "CycleLimits",
    "CycleResult",
    "CycleRun",
    "CycleTally",
    "ExpiryCycle",
    "FailureKind",
    "ItemFailure",
    "NoBatchObserver",
    "PoisonBackoff",
    "StopReason",
    "StoreFactory",
    "failure_kind",
    "misconfigured",
    "sqlstate_of",
]
