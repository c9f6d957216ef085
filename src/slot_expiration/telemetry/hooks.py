"""Hooks the loop calls around each cycle; telemetry lives behind them.

The cycle and the loop know nothing of logs, metrics or traces: they report
facts to a CycleHooks, and each sink (logs, metrics, traces) records them
its own way.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID

from slot_expiration.cycle import BatchResult, CycleResult


class CycleHooks(Protocol):
    def cycle_started(self, run_id: UUID, as_of: datetime) -> None: ...

    def batch_started(self, run_id: UUID, number: int) -> None: ...

    def batch_completed(self, run_id: UUID, batch: BatchResult) -> None:
        """A batch's transaction committed (a cycle has one, or several when draining)."""

    def cycle_completed(self, result: CycleResult) -> None: ...

    def cycle_failed(self, run_id: UUID, error: BaseException, *, budget_exceeded: bool) -> None:
        """The cycle rolled back whole: an infrastructure error or an exhausted budget."""

    def tick_skipped(self, skipped_ticks_total: int) -> None:
        """A tick came while a cycle was still running; it was dropped, not queued."""

    def loop_started(self, interval_seconds: float, batch_size: int) -> None: ...

    def loop_stopping(self, cycle_in_flight: bool) -> None: ...

    def loop_stopped(self) -> None: ...


class FanOutHooks:
    """Passes every event to each of several sinks, in order."""

    def __init__(self, sinks: Sequence[CycleHooks]) -> None:
        self._sinks = tuple(sinks)

    def cycle_started(self, run_id: UUID, as_of: datetime) -> None:
        for sink in self._sinks:
            sink.cycle_started(run_id, as_of)

    def batch_started(self, run_id: UUID, number: int) -> None:
        for sink in self._sinks:
            sink.batch_started(run_id, number)

    def batch_completed(self, run_id: UUID, batch: BatchResult) -> None:
        for sink in self._sinks:
            sink.batch_completed(run_id, batch)

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
