"""Prometheus metrics: the spec's names and types, on a registry of the worker's own.

Items are counted per batch as each batch commits, so a cycle that fails after
some batches committed still counts what those did; the backlog is measured
after every cycle, failed ones included, and its change over the trend window
from successful cycles only (cycle/backlog_trend.py), which the backlog alert
reads. The last success is stamped on the database's clock (the worker's, less
the skew measured at the cycle's start): a host whose clock runs slow must not
look hours late to the alert. Metrics carry no slot, tenant or database detail:
the only labels are `outcome`, the histogram's `le` and the build info's
`version`. The loop's interval is exported so that the alert on the last
success can follow it (three intervals, at least 30 minutes); the pause in force,
its age and its limit, as each cycle reads them, so that the alerts hold their
peace while it holds and speak once it outlives its limit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)

from slot_expiration import __version__
from slot_expiration.domain import CycleOutcome
from slot_expiration.expiry import (
    BACKLOG_COUNT_CAP,
    BacklogMeasured,
    BatchCommitted,
    ClockCompared,
    CycleEnded,
    CycleResult,
    DrainThrottled,
    PauseChecked,
    ReplicaLagRead,
    ThrottleReason,
)
from slot_expiration.expiry.backlog_trend import (
    BacklogSample,
    backlog_change,
    keep_for,
    trend_window,
)
from slot_expiration.loop import Event, LoopStarted, TickSkipped
from slot_expiration.options.settings import DEFAULT_INTERVAL_SECONDS
from slot_expiration.pause import LIMIT_WITHOUT_END

PREFIX: Final = "calendar_slot_expiration"
# From 1 ms to the longest budget a cycle is likely given (60 s).
DURATION_BUCKETS: Final = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    15.0,
    30.0,
    60.0,
)  # fmt: skip - the bucket bounds read as one row of data


class Metrics:
    """A sink that keeps the worker's metrics up to date."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._wall_clock = wall_clock
        self._monotonic = monotonic
        self._trend = _Trend(trend_window(DEFAULT_INTERVAL_SECONDS))
        # `<name>_created` series only double the text format; Prometheus ignores them.
        disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated upstream
        self._define(self.registry)

    def sink_failed(self, sink: str) -> None:
        """A sink raised on an event (loop.SinkFailures counts it here)."""
        self.sink_failures.labels(sink=sink).inc()

    def sinks_watched(self, sinks: Iterable[str]) -> None:
        """Each of these sinks' failures exported from 0: rate() sees the first one, and
        the dashboard's panel shows 0, not nothing, while none fails."""
        for sink in sinks:
            self.sink_failures.labels(sink=sink)

    def _define(self, registry: CollectorRegistry) -> None:
        self.build_info = Gauge(
            f"{PREFIX}_build_info",
            "The running worker's version (pyproject.toml's); always 1.",
            ["version"],
            registry=registry,
        )
        self.build_info.labels(version=__version__).set(1)
        self.cycle_duration = Histogram(
            f"{PREFIX}_cycle_duration_seconds",
            "Duration of a cycle, completed or failed.",
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.items = Counter(
            f"{PREFIX}_items", "Slots moved from Available to Expired.", registry=registry
        )
        self.backlog = Gauge(
            f"{PREFIX}_backlog",
            "Available slots with start_at <= now left after the last cycle, completed or "
            f"failed (counted up to {BACKLOG_COUNT_CAP}).",
            registry=registry,
        )
        self.backlog_capped = Gauge(
            f"{PREFIX}_backlog_capped",
            f"1 while the last count of the backlog stopped at its cap ({BACKLOG_COUNT_CAP}): "
            "the backlog is at least that; else 0.",
            registry=registry,
        )
        self.backlog_change = Gauge(
            f"{PREFIX}_backlog_change",
            "How the backlog changed over the trend window (30 min, or 3 intervals when "
            "longer) across this replica's consecutive successful cycles: below 0 while it "
            "comes down; minus the slots expired meanwhile where both counts stopped at the "
            "cap. NaN until two successful cycles in a row.",
            registry=registry,
        )
        self.backlog_change.set(math.nan)
        self.skip_locked = Counter(
            f"{PREFIX}_skip_locked",
            "Candidate rows passed over because another transaction held their lock.",
            registry=registry,
        )
        self.errors = Counter(
            f"{PREFIX}_errors",
            "Rows the database rejected (poison rows), left Available and quarantined.",
            registry=registry,
        )
        self.last_success = Gauge(
            f"{PREFIX}_last_success_timestamp_seconds",
            "Unix time of the last completed cycle; 0 until this process completes one.",
            registry=registry,
        )
        self.cycles = Counter(
            f"{PREFIX}_cycles", "Cycles by outcome.", ["outcome"], registry=registry
        )
        for outcome in CycleOutcome:
            self.cycles.labels(outcome=outcome.value)  # every outcome is exported from the start
        self.misconfigured = Gauge(
            f"{PREFIX}_misconfigured",
            "1 while the last cycle failed on what only a person can fix (a login, a grant, "
            "a table or column, the host's clock ahead of the database's), else 0.",
            registry=registry,
        )
        self.clock_skew = Gauge(
            f"{PREFIX}_clock_skew_seconds",
            "The worker's clock minus the database's at the start of the last cycle.",
            registry=registry,
        )
        self.skipped_ticks = Counter(
            f"{PREFIX}_skipped_ticks",
            "Ticks dropped because the previous cycle was still running.",
            registry=registry,
        )
        self.interval = Gauge(
            f"{PREFIX}_interval_seconds",
            "Seconds between the loop's ticks (--interval-seconds); 0 until the loop starts.",
            registry=registry,
        )
        self.quarantined = Gauge(
            f"{PREFIX}_quarantined_slots",
            "Slots in quarantine now: rejected by the database, still Available and retried "
            "on their backoff (parked ones are not counted).",
            registry=registry,
        )
        self.quarantine_oldest_age = Gauge(
            f"{PREFIX}_quarantine_oldest_age_seconds",
            "How long the oldest of those slots has been failing, from its first rejection, "
            "measured after the last cycle; 0 when none is in quarantine.",
            registry=registry,
        )
        self.paused = Gauge(
            f"{PREFIX}_paused",
            "1 while the last cycle found the deployment paused (`slot-expiration pause`) and "
            "expired nothing; else 0.",
            registry=registry,
        )
        self.pause_age = Gauge(
            f"{PREFIX}_pause_age_seconds",
            "How long the pause in force had lasted when the last cycle read it, on the "
            "database's clock; 0 when not paused.",
            registry=registry,
        )
        self.pause_limit = Gauge(
            f"{PREFIX}_pause_limit_seconds",
            "How long the pause in force may last: to the end `pause --for` gave it, else "
            f"{LIMIT_WITHOUT_END.total_seconds():g} s; 0 when not paused. Past it, the pause "
            "has outlived its limit (SlotExpirationPausedTooLong).",
            registry=registry,
        )
        self.http_bad_requests = Counter(
            f"{PREFIX}_http_bad_requests",
            "Malformed HTTP requests to the endpoint (an oversized head included), answered 400 "
            "and closed.",
            registry=registry,
        )
        self.throttled = Counter(
            f"{PREFIX}_throttled_seconds",
            "Seconds a drain waited between its batches, by why: a standby too far behind "
            "(replica_lag), the rest after each batch (nice), a batch slower than the "
            "drain's recent fastest (load).",
            ["reason"],
            registry=registry,
        )
        self.replica_lag = Gauge(
            f"{PREFIX}_replica_lag_seconds",
            "The largest lag of the streaming standbys a drain last read: how long ago "
            "the primary's WAL went past a standby's replay (or its replay_lag if larger).",
            registry=registry,
        )
        for reason in ThrottleReason:  # each series from 0, so that rate() sees the first
            self.throttled.labels(reason=reason.value)
        self.sink_failures = Counter(
            f"{PREFIX}_sink_failures",
            "Events a sink (the log, the history, the traces, ...) raised on: the event went "
            "on to the other sinks, the cycle was not affected.",
            ["sink"],
            registry=registry,
        )
        ProcessCollector(registry=registry)

    def exposition(self) -> bytes:
        """The registry in Prometheus's text format."""
        return generate_latest(self.registry)

    def __call__(self, event: Event) -> None:
        match event:
            case ClockCompared(_, skew_seconds):
                self.clock_skew.set(skew_seconds)
            case PauseChecked(_, pause, at):
                self.paused.set(0 if pause is None else 1)
                self.pause_age.set(0 if pause is None else pause.age(at).total_seconds())
                self.pause_limit.set(0 if pause is None else pause.limit.total_seconds())
            case BatchCommitted(_, batch):
                self.items.inc(batch.expired_count)
                self.skip_locked.inc(batch.skipped_locked_count)
                self.errors.inc(batch.failed_count)
            case ReplicaLagRead(_, lag_seconds):
                self.replica_lag.set(lag_seconds)
            case DrainThrottled(_, reason, seconds):
                self.throttled.labels(reason=reason.value).inc(seconds)
            case BacklogMeasured():
                self._measured(event)
            case CycleEnded(result):
                self._ended(result)
            case TickSkipped():
                self.skipped_ticks.inc()
            case LoopStarted(interval_seconds):
                self.interval.set(interval_seconds)
                self._trend.window = trend_window(interval_seconds)

    def _measured(self, measured: BacklogMeasured) -> None:
        self.backlog.set(measured.backlog)
        self.backlog_capped.set(1 if measured.capped else 0)
        self.quarantined.set(measured.quarantined)  # parked ones apart
        self.quarantine_oldest_age.set(measured.oldest_quarantined_seconds or 0.0)
        self._trend.measured = measured.backlog

    def _ended(self, result: CycleResult) -> None:
        self.cycle_duration.observe(result.duration_ms / 1000.0)
        self.cycles.labels(outcome=result.outcome.value).inc()
        if result.outcome is CycleOutcome.SUCCESS:
            self.misconfigured.set(0)
            # The database's clock: the skew was measured at this cycle's start.
            self.last_success.set(self._wall_clock() - (result.clock_skew_seconds or 0.0))
            change = self._trend.success(self._monotonic(), result.expired_count)
            if change is not None:
                self.backlog_change.set(change)
        else:
            # A run of successes ends: the next count is not compared across the gap. The
            # change exported holds until the next run can say more.
            self._trend.broken()
            # A transient failure says nothing of the configuration either way; a paused
            # cycle passed every check before it read the pause.
            if result.outcome.needs_a_person:
                self.misconfigured.set(1)
            elif result.outcome is CycleOutcome.PAUSED:
                self.misconfigured.set(0)


class _Trend:
    """This replica's run of consecutive successful cycles, as far back as the trend window
    reads, and the backlog the cycle under way counted (None: not counted)."""

    def __init__(self, window: timedelta) -> None:
        self.window = window
        self.measured: int | None = None
        self._run: list[BacklogSample] = []

    def success(self, at: float, expired: int) -> int | None:
        """A successful cycle ended at `at` (monotonic); the change it shows, if any."""
        if self.measured is None:  # stopped before its count: nothing to compare
            return None
        self._run = keep_for([*self._run, BacklogSample(at, self.measured, expired)], self.window)
        self.measured = None
        return backlog_change(self._run, self.window)

    def broken(self) -> None:
        self._run = []
        self.measured = None


def exported_metric_names(registry: CollectorRegistry) -> set[str]:
    """Every sample name the registry exposes (with _total, _bucket, _sum, ... suffixes)."""
    return {sample.name for family in registry.collect() for sample in family.samples}
