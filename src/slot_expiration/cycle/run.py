"""What a cycle is handed when it starts: its identity, its clock and who to tell."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol
from uuid import UUID

from slot_expiration.cycle.result import BatchResult


class BatchObserver(Protocol):
    """Told what a cycle finds and does as it goes (the telemetry hooks are one)."""

    def clock_compared(self, run_id: UUID, skew_seconds: float) -> None:
        """The worker's clock minus the database's, at the cycle's start."""

    def batch_started(self, run_id: UUID, number: int) -> None: ...

    def batch_completed(self, run_id: UUID, batch: BatchResult) -> None:
        """The batch's transaction committed; `batch` lists what it did."""

    def backlog_measured(self, run_id: UUID, backlog: int) -> None:
        """Due rows left after the cycle's batches (counted even when one failed)."""

    def quarantine_measured(self, run_id: UUID, count: int) -> None:
        """Slots in quarantine after the cycle, still Available and not parked (parked
        ones wait for a person, not for the worker); once per cycle, after the backlog."""


class NoBatchObserver:
    """An observer that ignores everything; observers override what they need."""

    def clock_compared(self, run_id: UUID, skew_seconds: float) -> None:
        del run_id, skew_seconds

    def batch_started(self, run_id: UUID, number: int) -> None:
        del run_id, number

    def batch_completed(self, run_id: UUID, batch: BatchResult) -> None:
        del run_id, batch

    def backlog_measured(self, run_id: UUID, backlog: int) -> None:
        del run_id, backlog

    def quarantine_measured(self, run_id: UUID, count: int) -> None:
        del run_id, count


def _never() -> bool:
    return False


@dataclass(frozen=True, slots=True)
class CycleRun:
    """One run of a cycle.

    `stop_requested` is polled between batches: once it answers True the cycle
    starts no further batch (the one in flight finishes or rolls back whole).
    `deadline` (on the cycle's monotonic clock) is when the cycle's budget runs
    out: no batch starts that would likely not end before it. `pause` waits
    between two batches of a drain; the loop's own ends early on a stop.
    """

    run_id: UUID
    as_of: datetime
    # AsOf is the worker's clock now (not an operator's chosen moment): the backlog left
    # is then counted on the database's clock, which a skewed host clock cannot bend.
    as_of_is_now: bool = False
    observer: BatchObserver = field(default_factory=NoBatchObserver)
    stop_requested: Callable[[], bool] = _never
    deadline: float | None = None
    pause: Callable[[float], Awaitable[None]] = asyncio.sleep
