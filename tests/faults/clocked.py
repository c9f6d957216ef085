"""The worker's cycles on an injected clock: one every interval, no waiting.

The quarantine's backoff runs on the worker's clock, so a test can follow a
poison row through hours of retries in seconds. AsOf is the same clock, as in
production (the spec: AsOf = the worker's clock at cycle start).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from slot_expiration.cycle import PoisonBackoff
from tests.support.cycles import Outcome, run_cycle
from tests.support.slots import AS_OF

INTERVAL = timedelta(seconds=300)


@dataclass
class ClockedCycles:
    url: str
    batch_size: int
    backoff: PoisonBackoff = field(default_factory=PoisonBackoff)
    now: datetime = AS_OF
    outcomes: list[Outcome] = field(default_factory=list)
    at: list[datetime] = field(default_factory=list)

    async def tick(self) -> Outcome:
        """One cycle at the current moment; the clock then moves on one interval."""
        moment = self.now
        outcome = await run_cycle(
            self.url, self.batch_size, as_of=moment, clock=lambda: moment, backoff=self.backoff
        )
        self.outcomes.append(outcome)
        self.at.append(moment)
        self.now = moment + INTERVAL
        return outcome

    @property
    def reported_expired(self) -> int:
        return sum(outcome.expired_count for outcome in self.outcomes)

    def seconds_since_start(self, moment: datetime) -> int:
        return int((moment - AS_OF).total_seconds())
