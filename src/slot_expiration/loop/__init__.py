"""The polling loop around the cycle: ticks, budget, skipped ticks, signals."""

from slot_expiration.cycle import CycleCancelledError
from slot_expiration.domain import utc_now
from slot_expiration.loop.observed_cycle import Cycle, CycleBudgetExceededError, observed_cycle
from slot_expiration.loop.polling_loop import LoopStats, LoopTiming, PollingLoop
from slot_expiration.loop.signals import (
    StopSignal,
    cancel_on_signals,
    stop_on_signals,
    terminate_as_interrupt,
)
from slot_expiration.loop.ticker import IntervalTicker, Ticker, wait_or_stop

__all__ = [
    "Cycle",
    "CycleBudgetExceededError",
    "CycleCancelledError",
    "IntervalTicker",
    "LoopStats",
    "LoopTiming",
    "PollingLoop",
    "StopSignal",
    "Ticker",
    "cancel_on_signals",
    "observed_cycle",
    "stop_on_signals",
    "terminate_as_interrupt",
    "utc_now",
    "wait_or_stop",
]
