"""What the polling loop tells besides its cycles' events, and where all of them go: a sink
is any callable taking an event; it matches the ones it cares about and ignores the rest.

An observer never breaks the observed: fan_out hands each event to every sink, and what a
sink raises is reported (SinkFailures: counted each time, logged once per sink and kind of
error) and goes no further, as the standard library's logging handlers report their own
failures (Handler.handleError) and go on. A cycle whose batch committed stays committed
and counted however its sinks fare; the loop never loses a cycle's task to one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Final

import structlog

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


# The log event of a sink that raised (telemetry.logs.LogEvent names it too).
SINK_FAILED: Final = "sink.failed"
# The longest text of what a sink raised that its log line carries.
_MAX_ERROR_CHARS: Final = 500


def sink_name(sink: Sink) -> str:
    """How a sink is named in the log and the metric: its class, or its function."""
    named = getattr(sink, "__qualname__", None)
    return named if isinstance(named, str) else type(sink).__name__


@dataclass(slots=True)
class SinkFailures:
    """What sinks raised: `count` told of each failure (a metric), and one `sink.failed`
    line per sink and kind of error (a sink that fails on every event must not flood the
    log: its stderr may be what fails). `watch` is told each sink's name once, as a fan_out
    takes it, before any event (the metric's series from 0). Reporting itself never
    raises."""

    count: Callable[[str], None] | None = None
    watch: Callable[[Iterable[str]], None] | None = None
    _logged: set[tuple[str, str]] = field(default_factory=set)

    def watching(self, sinks: Iterable[Sink]) -> None:
        with suppress(Exception):
            if self.watch is not None:
                self.watch(sink_name(sink) for sink in sinks)

    def __call__(self, sink: Sink, error: Exception) -> None:
        name = sink_name(sink)
        with suppress(Exception):
            if self.count is not None:
                self.count(name)
        kind = (name, type(error).__name__)
        if kind in self._logged:
            return
        self._logged.add(kind)
        with suppress(Exception):  # the log's own sink, on a full device, say
            structlog.get_logger("slot_expiration").error(
                SINK_FAILED,
                sink=name,
                error_type=type(error).__name__,
                exception=str(error)[:_MAX_ERROR_CHARS],
                detail="its events go on to the other sinks; it is logged once per kind",
            )


def fan_out(*sinks: Sink, on_failure: SinkFailures | None = None) -> Sink:
    """One sink that hands each event to every one of `sinks`, in order; what one raises is
    reported (`on_failure`, by default a SinkFailures of its own) and stops nothing."""
    failures = on_failure or SinkFailures()
    failures.watching(sinks)

    def emit(event: Event) -> None:
        for sink in sinks:
            try:
                sink(event)
            except Exception as error:  # noqa: BLE001 - an observer never breaks the observed
                failures(sink, error)

    return emit
