"""What a cycle is handed when it starts: its identity, its clock, where its events go,
when to stop, and its progress (which outlives it, so a failed cycle's is reported)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol
from uuid import UUID, uuid4

from slot_expiration.domain import utc_now
from slot_expiration.expiry.events import CycleEvent, EmitCycleEvent
from slot_expiration.expiry.result import CycleProgress


class Stop(Protocol):
    """A graceful stop as the cycle sees it (the loop's StopSignal is one): asked for or
    not, and a pause that ends early once it is."""

    @property
    def requested(self) -> asyncio.Event: ...

    async def pause(self, seconds: float) -> None: ...


def _never() -> bool:
    return False


def _nowhere(event: CycleEvent) -> None:
    del event


@dataclass(frozen=True, slots=True)
class CycleRun:
    """One run of a cycle.

    `stop_requested` is polled between batches: once it answers True the cycle
    starts no further batch (the one in flight finishes or rolls back whole).
    `deadline` (on the cycle's monotonic clock) is when the cycle's budget runs
    out: no batch starts that would likely not end before it. `pause` waits
    between two batches of a drain; the loop's own ends early on a stop.
    """

    as_of: datetime
    # AsOf is the worker's clock now (not an operator's chosen moment): the backlog left
    # is then counted on the database's clock, which a skewed host clock cannot bend.
    as_of_is_now: bool = False
    emit: EmitCycleEvent = _nowhere
    stop_requested: Callable[[], bool] = _never
    deadline: float | None = None
    pause: Callable[[float], Awaitable[None]] = asyncio.sleep
    run_id: UUID = field(default_factory=uuid4)
    started_at: datetime = field(default_factory=utc_now)
    progress: CycleProgress = field(init=False)

    def __post_init__(self) -> None:
        progress = CycleProgress(self.run_id, self.as_of, self.started_at)
        object.__setattr__(self, "progress", progress)  # frozen: set once, here
