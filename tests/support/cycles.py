"""Running a real cycle from a test and keeping what each of its batches reported."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from slot_expiration.domain import SlotRef, utc_now
from slot_expiration.expiry import (
    BacklogMeasured,
    BatchCommitted,
    BatchResult,
    BatchStarted,
    CycleEvent,
    CycleLimits,
    CycleResult,
    CycleRun,
    ExpiryCycle,
)
from slot_expiration.expiry.result import ItemFailure
from slot_expiration.expiry.store import CycleStore
from slot_expiration.options import CycleOptions, load_settings
from slot_expiration.quarantine import PoisonBackoff
from tests.support.database import LIMITS
from tests.support.slots import AS_OF
from tests.support.witness import witnessed


@dataclass
class BatchLog:
    """A sink that remembers every batch (and the backlog measured)."""

    batches: list[BatchResult] = field(default_factory=list)
    started: list[int] = field(default_factory=list)
    backlogs: list[int] = field(default_factory=list)
    quarantined: list[int] = field(default_factory=list)
    oldest_quarantined: list[float | None] = field(default_factory=list)

    def __call__(self, event: CycleEvent) -> None:
        match event:
            case BacklogMeasured(_, backlog, quarantined, oldest):
                self.backlogs.append(backlog)
                self.quarantined.append(quarantined)
                self.oldest_quarantined.append(oldest)
            case BatchStarted(_, number):
                self.started.append(number)
            case BatchCommitted(_, batch):
                self.batches.append(batch)


@dataclass(frozen=True)
class Outcome:
    """A cycle's result together with the batches it reported."""

    result: CycleResult
    batches: list[BatchResult]
    quarantined: list[int] = field(default_factory=list)  # as the cycle reported it
    # How long the oldest of them had been failing, as the cycle measured it.
    oldest_quarantined: list[float | None] = field(default_factory=list)

    # The rows each committed batch expired, as the database's witness saw them
    # (tests/support/witness.py: the batch statement returns counts only), when the
    # cycle ran witnessed; cycles run side by side each see all of them.
    witnessed_batches: list[list[SlotRef]] | None = None

    @property
    def expired_batches(self) -> list[list[SlotRef]]:
        assert self.witnessed_batches is not None, "run_cycle(..., witness=True) says which"
        return self.witnessed_batches

    @property
    def expired(self) -> list[SlotRef]:
        return [slot for batch in self.expired_batches for slot in batch]

    @property
    def failures(self) -> list[ItemFailure]:
        return [failure for batch in self.batches for failure in batch.failures]

    @property
    def expired_count(self) -> int:
        return self.result.expired_count

    @property
    def failed_count(self) -> int:
        return self.result.failed_count

    @property
    def selected_count(self) -> int:
        return self.result.selected_count

    @property
    def skipped_locked_count(self) -> int:
        return self.result.skipped_locked_count


# The worker's defaults, from its options model (the one place they are written).
DEFAULTS = load_settings(CycleOptions, environment=False)


def default_backoff() -> PoisonBackoff:
    return PoisonBackoff(DEFAULTS.poison_backoff_seconds, DEFAULTS.poison_backoff_max_seconds)


def make_cycle(
    url: str,
    batch_size: int = DEFAULTS.batch_size,
    *,
    max_batches: int = DEFAULTS.max_batches_per_cycle,
    backoff: PoisonBackoff | None = None,
    clock: Callable[[], datetime] = utc_now,
    monotonic: Callable[[], float] = time.monotonic,
    batch_pause_seconds: float = DEFAULTS.batch_pause_seconds,
    max_clock_skew_seconds: float = DEFAULTS.max_clock_skew_seconds,
    drain_batch_size: int | None = None,  # None: batch_size for every batch
    max_replica_lag_seconds: float = 0.0,  # 0: never look at the standbys
    drain_nice_ratio: float = 0.0,
) -> ExpiryCycle:
    limits = CycleLimits(
        batch_size=batch_size,
        drain_batch_size=drain_batch_size,
        max_batches=max_batches,
        batch_pause_seconds=batch_pause_seconds,
        backoff=backoff or default_backoff(),
        max_clock_skew_seconds=max_clock_skew_seconds,
        quarantine_retention=timedelta(days=DEFAULTS.history_retention_days),
        max_replica_lag_seconds=max_replica_lag_seconds,
        drain_nice_ratio=drain_nice_ratio,
    )
    return ExpiryCycle(
        lambda: CycleStore.connect(url, LIMITS), limits, monotonic=monotonic, clock=clock
    )


async def run_cycle(
    url: str,
    batch_size: int = DEFAULTS.batch_size,
    as_of: datetime = AS_OF,
    *,
    max_batches: int = DEFAULTS.max_batches_per_cycle,
    backoff: PoisonBackoff | None = None,
    clock: Callable[[], datetime] = utc_now,
    stop_requested: Callable[[], bool] | None = None,
    max_clock_skew_seconds: float = DEFAULTS.max_clock_skew_seconds,
    witness: bool = False,
) -> Outcome:
    """One cycle and what it reported; `witness`: which rows each batch expired, read from
    the database (tests/support/witness.py), as `Outcome.expired` and `expired_batches`."""
    cycle = make_cycle(
        url,
        batch_size,
        max_batches=max_batches,
        backoff=backoff,
        clock=clock,
        max_clock_skew_seconds=max_clock_skew_seconds,
    )
    log = BatchLog()
    run = CycleRun(as_of=as_of, emit=log, stop_requested=stop_requested or (lambda: False))
    if not witness:
        result = await cycle.run(run)
        return Outcome(result, log.batches, log.quarantined, log.oldest_quarantined)
    async with witnessed(url) as seen:
        result = await cycle.run(run)
    return Outcome(result, log.batches, log.quarantined, log.oldest_quarantined, seen.batches)
