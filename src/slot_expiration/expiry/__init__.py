"""One cycle of the worker: one batch (or, draining, several), under its budget, one result,
told as events."""

from slot_expiration.expiry.budget import Cycle, run_cycle
from slot_expiration.expiry.cycle import ExpiryCycle, StoreFactory
from slot_expiration.expiry.drain import DRAIN_COUNT_CAP, DrainProgress
from slot_expiration.expiry.events import (
    BacklogMeasured,
    BatchCommitted,
    BatchStarted,
    ClockCompared,
    CycleEnded,
    CycleEvent,
    CycleStarted,
    DrainStarted,
    DrainThrottled,
    EmitCycleEvent,
    PauseChecked,
    ReplicaLagRead,
    StandbysNotJudged,
    describe,
)
from slot_expiration.expiry.failure import ClockSkewError, CycleFailed, outcome_of, sqlstate_of
from slot_expiration.expiry.limits import CycleLimits
from slot_expiration.expiry.result import (
    BACKLOG_COUNT_CAP,
    FAILED_SAMPLE_SIZE,
    BatchResult,
    CycleProgress,
    CycleResult,
    StopReason,
)
from slot_expiration.expiry.run import CycleRun
from slot_expiration.expiry.throttle import StandbysUnseen, ThrottleReason

__all__ = [
    "BACKLOG_COUNT_CAP",
    "DRAIN_COUNT_CAP",
    "FAILED_SAMPLE_SIZE",
    "BacklogMeasured",
    "BatchCommitted",
    "BatchResult",
    "BatchStarted",
    "ClockCompared",
    "ClockSkewError",
    "Cycle",
    "CycleEnded",
    "CycleEvent",
    "CycleFailed",
    "CycleLimits",
    "CycleProgress",
    "CycleResult",
    "CycleRun",
    "CycleStarted",
    "DrainProgress",
    "DrainStarted",
    "DrainThrottled",
    "EmitCycleEvent",
    "ExpiryCycle",
    "PauseChecked",
    "ReplicaLagRead",
    "StandbysNotJudged",
    "StandbysUnseen",
    "StopReason",
    "StoreFactory",
    "ThrottleReason",
    "describe",
    "outcome_of",
    "run_cycle",
    "sqlstate_of",
]
