"""The polling loop around the cycle: ticks, budget, skipped ticks, signals."""

from slot_expiration.loop.polling_loop import (
    Cycle,
    CycleCancelledError,
    LoopStats,
    LoopTiming,
    PollingLoop,
    utc_now,
)
from slot_expiration.loop.signals import StopSignal, stop_on_signals, terminate_as_interrupt
from slot_expiration.loop.ticker import IntervalTicker, Ticker, wait_or_stop

__all__ = [
    "Cycle",
    "CycleCancelledError",
    "IntervalTicker",
    "LoopStats",
    "LoopTiming",
    "PollingLoop",
    "StopSignal",
    "Ticker",
    "stop_on_signals",
    "terminate_as_interrupt",
    "utc_now",
    "wait_or_stop",
]
