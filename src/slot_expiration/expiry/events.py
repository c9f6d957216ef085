"""What a cycle tells as it goes: small frozen events, emitted in this order (the pause in
force, if any, once its checks passed; a drain's count before its first batch; a batch's
start and commit once per batch; the backlog after the batches, also when one failed, and
instead of them while paused).

Whoever records them (logs, metrics, traces, readiness, the history) is a plain callable
taking the events it cares about; the cycle knows none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from slot_expiration.expiry.drain import DRAIN_COUNT_CAP, DrainProgress
from slot_expiration.expiry.result import BACKLOG_COUNT_CAP, BatchResult, CycleResult
from slot_expiration.expiry.throttle import StandbysUnseen, ThrottleReason
from slot_expiration.pause import Pause


@dataclass(frozen=True, slots=True)
class CycleStarted:
    run_id: UUID
    as_of: datetime


@dataclass(frozen=True, slots=True)
class ClockCompared:
    """The worker's clock minus the database's, at the cycle's start."""

    run_id: UUID
    skew_seconds: float


@dataclass(frozen=True, slots=True)
class DrainStarted:
    """A drain (a cycle of more than one batch) counted the rows due at its `as_of` before
    its first batch, up to DRAIN_COUNT_CAP (`capped`: the count stopped there)."""

    run_id: UUID
    backlog: int

    @property
    def capped(self) -> bool:
        return self.backlog >= DRAIN_COUNT_CAP


@dataclass(frozen=True, slots=True)
class PauseChecked:
    """The pause in force when the cycle started (None: none), read in its first
    transaction, `at` the database's clock then: a paused cycle runs no batch."""

    run_id: UUID
    pause: Pause | None
    at: datetime


@dataclass(frozen=True, slots=True)
class BatchStarted:
    run_id: UUID
    number: int  # 1 for the cycle's first


@dataclass(frozen=True, slots=True)
class BatchCommitted:
    """A batch's transaction committed; `batch` lists what it did. In a drain, `drain` says
    how far the drain has come (None in a cycle of one batch)."""

    run_id: UUID
    batch: BatchResult
    drain: DrainProgress | None = None


@dataclass(frozen=True, slots=True)
class DrainThrottled:
    """A drain waited `seconds` before its next batch, and why; `lag_seconds`: the largest
    standby lag it saw (replica_lag), None otherwise."""

    run_id: UUID
    reason: ThrottleReason
    seconds: float
    lag_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class ReplicaLagRead:
    """Before a batch, the largest lag of the streaming standbys (0.0: none behind)."""

    run_id: UUID
    lag_seconds: float


@dataclass(frozen=True, slots=True)
class StandbysNotJudged:
    """The drain could not see where the streaming standbys' replay is, and why: it went
    on without judging their lag (and looks again at its next cycle)."""

    run_id: UUID
    why: StandbysUnseen


@dataclass(frozen=True, slots=True)
class BacklogMeasured:
    """After the cycle's batches (also when one failed): due rows left, counted up to a cap
    (`capped`: the count stopped there), and slots in quarantine, still Available and not
    parked (parked ones wait for a person), with how long the oldest of them has been
    failing (None: none is)."""

    run_id: UUID
    backlog: int
    quarantined: int
    oldest_quarantined_seconds: float | None = None

    @property
    def capped(self) -> bool:
        return self.backlog >= BACKLOG_COUNT_CAP


@dataclass(frozen=True, slots=True)
class CycleEnded:
    """How the cycle ended (`result.outcome`) and what its committed batches did; for a
    cycle that failed, why (`error`) and whether a batch was running then (rolled back)."""

    result: CycleResult
    error: BaseException | None = None
    batch_in_flight: bool = False

    @property
    def run_id(self) -> UUID:
        return self.result.run_id


CycleEvent = (
    CycleStarted
    | ClockCompared
    | PauseChecked
    | DrainStarted
    | BatchStarted
    | BatchCommitted
    | ReplicaLagRead
    | DrainThrottled
    | StandbysNotJudged
    | BacklogMeasured
    | CycleEnded
)
EmitCycleEvent = Callable[[CycleEvent], None]


def describe(error: BaseException) -> str:
    """An error's message, or its type when it has none (a cancellation, say)."""
    return str(error) or type(error).__name__
