"""Liveness of the polling loop, judged from its events alone: is it ticking, is it stuck?

The ticker ticks every interval whatever the cycles do (a tick during a cycle
is skipped, and reported), so a live loop reports a tick at least once per
interval. A cycle is abandoned at its budget; one still running well past it
means the loop is wedged. /healthz answers from this, on an injected clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from uuid import UUID

from slot_expiration.expiry import CycleEnded, CycleStarted
from slot_expiration.loop import Event, LoopStarted, LoopStopped, LoopStopping, TickSkipped

# Room for a late wake-up, a slow connect or a slow rollback before the loop
# counts as dead: the connect timeout of a worker session is 10 s too.
SLACK_SECONDS: Final = 10.0


@dataclass(frozen=True, slots=True)
class LivenessReport:
    live: bool
    status: str  # "ok", "stopping", "not_ticking" or "stuck_in_cycle"
    detail: str
    seconds_since_tick: float
    cycle_running_seconds: float | None

    def as_json(self) -> dict[str, Any]:
        return {
            "live": self.live,
            "status": self.status,
            "detail": self.detail,
            "seconds_since_tick": round(self.seconds_since_tick, 3),
            "cycle_running_seconds": (
                None if self.cycle_running_seconds is None else round(self.cycle_running_seconds, 3)
            ),
        }


class Liveness:
    """A sink that remembers the loop's last sign of life."""

    def __init__(
        self,
        interval_seconds: float,
        max_cycle_seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tick_overdue_after = interval_seconds + SLACK_SECONDS
        self.stuck_after = max_cycle_seconds + SLACK_SECONDS
        self._monotonic = monotonic
        self._last_tick = monotonic()  # start-up counts as the first sign of life
        self._cycles: dict[UUID, float] = {}
        self._stopping = False

    def report(self) -> LivenessReport:
        now = self._monotonic()
        since_tick = now - self._last_tick
        running = now - min(self._cycles.values()) if self._cycles else None
        if running is not None and running > self.stuck_after:
            return LivenessReport(
                False,
                "stuck_in_cycle",
                f"a cycle has run for {running:.1f} s, past its budget and "
                f"{SLACK_SECONDS:g} s more ({self.stuck_after:g} s)",
                since_tick,
                running,
            )
        if self._stopping:
            return LivenessReport(True, "stopping", "stopping gracefully", since_tick, running)
        if since_tick > self.tick_overdue_after:
            return LivenessReport(
                False,
                "not_ticking",
                f"no tick for {since_tick:.1f} s (expected one every "
                f"{self.tick_overdue_after - SLACK_SECONDS:g} s)",
                since_tick,
                running,
            )
        return LivenessReport(True, "ok", "ticking", since_tick, running)

    def _beat(self) -> None:
        self._last_tick = self._monotonic()

    def __call__(self, event: Event) -> None:
        match event:
            case CycleStarted(run_id):
                self._beat()
                self._cycles[run_id] = self._last_tick
            case CycleEnded():
                self._cycles.pop(event.run_id, None)
            case TickSkipped() | LoopStarted():
                self._beat()
            case LoopStopping() | LoopStopped():
                self._stopping = True
