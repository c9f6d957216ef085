"""The polling loop around the cycle: ticks, skipped ticks, signals, and where events go."""

from slot_expiration.loop.events import (
    Event,
    LoopEvent,
    LoopStarted,
    LoopStopped,
    LoopStopping,
    Sink,
    SinkFailures,
    TickSkipped,
    fan_out,
)
from slot_expiration.loop.polling_loop import LoopStats, LoopTiming, PollingLoop
from slot_expiration.loop.signals import (
    StopSignal,
    cancel_on_signals,
    stop_on_signals,
    terminate_as_interrupt,
)
from slot_expiration.loop.ticker import IntervalTicker, Ticker, wait_or_stop

__all__ = [
    "Event",
    "IntervalTicker",
    "LoopEvent",
    "LoopStarted",
    "LoopStats",
    "LoopStopped",
    "LoopStopping",
    "LoopTiming",
    "PollingLoop",
    "Sink",
    "SinkFailures",
    "StopSignal",
    "TickSkipped",
    "Ticker",
    "cancel_on_signals",
    "fan_out",
    "stop_on_signals",
    "terminate_as_interrupt",
    "wait_or_stop",
]
