"""What the polling loop tells besides its cycles' events, and where all of them go: a sink
is any callable taking an event; it matches the ones it cares about and ignores the rest."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from slot_expiration.expiry import CycleEvent


@dataclass(frozen=True, slots=True)
class TickSkipped:
    """A tick came while a cycle was still running; it was dropped, not queued."""

    skipped_ticks_total: int


@dataclass(frozen=True, slots=True)
class LoopStarted:
    interval_seconds: float
    batch_size: int


@dataclass(frozen=True, slots=True)
class LoopStopping:
    cycle_in_flight: bool


@dataclass(frozen=True, slots=True)
class LoopStopped:
    pass


LoopEvent = TickSkipped | LoopStarted | LoopStopping | LoopStopped
Event = CycleEvent | LoopEvent
Sink = Callable[[Event], None]


def fan_out(*sinks: Sink) -> Sink:
    """One sink that hands each event to every one of `sinks`, in order."""

    def emit(event: Event) -> None:
        for sink in sinks:
            sink(event)

    return emit
