"""Hooks the loop calls around each cycle; telemetry lives behind them.

The cycle and the loop know nothing of logs, metrics or traces: they report
facts to a CycleHooks, and each sink (logs, metrics, traces, liveness,
readiness) records them its own way. A sink derives from NoHooks and
overrides only what it records.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID

from slot_expiration.cycle import BatchResult, CycleResult, NoBatchObserver


class CycleHooks(Protocol):
    def cycle_started(self, run_id: UUID, as_of: datetime) -> None: ...

    def clock_compared(self, run_id: UUID, skew_seconds: float) -> None:
        """The worker's clock minus the database's, at the cycle's start."""

    def batch_started(self, run_id: UUID, number: int) -> None: ...

    def batch_completed(self, run_id: UUID, batch: BatchResult) -> None:
        """A batch's transaction committed (a cycle has one, or several when draining)."""

    def backlog_measured(self, run_id: UUID, backlog: int) -> None:
        """Due rows left after the cycle's batches, even when one of them failed."""

    def quarantine_measured(self, run_id: UUID, count: int) -> None:
        """Slots in quarantine after the cycle, still Available and not parked; once per
        cycle, after the backlog (even when a batch failed)."""

    def cycle_completed(self, result: CycleResult) -> None: ...

    def cycle_failed(self, run_id: UUID, error: BaseException, *, budget_exceeded: bool) -> None:
        """The batch in flight rolled back whole: an error, a refusal, or the budget spent."""

    def tick_skipped(self, skipped_ticks_total: int) -> None:
        """A tick came while a cycle was still running; it was dropped, not queued."""

    def loop_started(self, interval_seconds: float, batch_size: int) -> None: ...

    def loop_stopping(self, cycle_in_flight: bool) -> None: ...

    def loop_stopped(self) -> None: ...


class NoHooks(NoBatchObserver):
    """A sink that records nothing: the base of every sink."""

    def cycle_started(self, run_id: UUID, as_of: datetime) -> None:
        del run_id, as_of

    def cycle_completed(self, result: CycleResult) -> None:
        del result

    def cycle_failed(self, run_id: UUID, error: BaseException, *, budget_exceeded: bool) -> None:
        del run_id, error, budget_exceeded

    def tick_skipped(self, skipped_ticks_total: int) -> None:
        del skipped_ticks_total

    def loop_started(self, interval_seconds: float, batch_size: int) -> None:
        del interval_seconds, batch_size

    def loop_stopping(self, cycle_in_flight: bool) -> None:
        del cycle_in_flight

    def loop_stopped(self) -> None:
        pass


class FanOutHooks:
    """Passes every event to each of several sinks, in order."""

    def __init__(self, sinks: Sequence[CycleHooks]) -> None:
        self._sinks = tuple(sinks)

    def cycle_started(self, run_id: UUID, as_of: datetime) -> None:
        for sink in self._sinks:
            sink.cycle_started(run_id, as_of)

    def clock_compared(self, run_id: UUID, skew_seconds: float) -> None:
        for sink in self._sinks:
            sink.clock_compared(run_id, skew_seconds)

    def batch_started(self, run_id: UUID, number: int) -> None:
        for sink in self._sinks:
            sink.batch_started(run_id, number)

    def batch_completed(self, run_id: UUID, batch: BatchResult) -> None:
        for sink in self._sinks:
            sink.batch_completed(run_id, batch)

    def backlog_measured(self, run_id: UUID, backlog: int) -> None:
        for sink in self._sinks:
            sink.backlog_measured(run_id, backlog)

    def quarantine_measured(self, run_id: UUID, count: int) -> None:
        for sink in self._sinks:
            sink.quarantine_measured(run_id, count)

    def cycle_completed(self, result: CycleResult) -> None:
        for sink in self._sinks:
            sink.cycle_completed(result)

    def cycle_failed(self, run_id: UUID, error: BaseException, *, budget_exceeded: bool) -> None:
        for sink in self._sinks:
            sink.cycle_failed(run_id, error, budget_exceeded=budget_exceeded)

    def tick_skipped(self, skipped_ticks_total: int) -> None:
        for sink in self._sinks:
            sink.tick_skipped(skipped_ticks_total)

    def loop_started(self, interval_seconds: float, batch_size: int) -> None:
        for sink in self._sinks:
            sink.loop_started(interval_seconds, batch_size)

    def loop_stopping(self, cycle_in_flight: bool) -> None:
        for sink in self._sinks:
            sink.loop_stopping(cycle_in_flight)

    def loop_stopped(self) -> None:
        for sink in self._sinks:
            sink.loop_stopped()
