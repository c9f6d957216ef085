"""The worker's cycles on an injected clock: one every interval, no waiting.

The quarantine's backoff runs on the worker's clock, so a test can follow a
poison row through hours of retries in seconds. AsOf is the same clock, as in
production (the spec: AsOf = the worker's clock at cycle start).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from slot_expiration.quarantine import PoisonBackoff
from tests.support.cycles import Outcome, default_backoff, run_cycle
from tests.support.slots import AS_OF

INTERVAL = timedelta(seconds=300)


@dataclass(frozen=True, slots=True)
class Tick:
    at: datetime  # the worker's clock (and AsOf) of the cycle
    outcome: Outcome
    wall_seconds: float  # how long the cycle really took

    @property
    def seconds(self) -> int:
        """When it ran, in seconds on the worker's clock since the first cycle."""
        return int((self.at - AS_OF).total_seconds())


@dataclass
class ClockedCycles:
    url: str
    batch_size: int
    backoff: PoisonBackoff = field(default_factory=default_backoff)
    now: datetime = AS_OF
    ticks: list[Tick] = field(default_factory=list)
    witness: bool = False  # each outcome says which rows it expired (tests/support/witness.py)

    async def tick(self) -> Outcome:
        """One cycle at the current moment; the clock then moves on one interval."""
        moment = self.now
        started = time.monotonic()
        outcome = await run_cycle(
            self.url,
            self.batch_size,
            as_of=moment,
            clock=lambda: moment,
            backoff=self.backoff,
            witness=self.witness,
        )
        self.ticks.append(Tick(moment, outcome, time.monotonic() - started))
        self.now = moment + INTERVAL
        return outcome

    async def until(self, seconds: int) -> None:
        """Cycles, one per interval, up to `seconds` on the worker's clock."""
        while self.now <= AS_OF + timedelta(seconds=seconds):
            await self.tick()

    @property
    def outcomes(self) -> list[Outcome]:
        return [tick.outcome for tick in self.ticks]

    @property
    def reported_expired(self) -> int:
        return sum(outcome.expired_count for outcome in self.outcomes)
