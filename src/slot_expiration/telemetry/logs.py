"""Structured logs: the stable event names the spec asks for, and their setup.

A database's message is logged as the history keeps it: at most MAX_MESSAGE_CHARS
characters, its full length noted (domain/text.py). A trigger may raise a message of a
megabyte on every row it refuses: whole, one cycle of 200 such rows would log 200 MB."""

from __future__ import annotations

import logging
import sys
from datetime import datetime
from typing import Final, TextIO

import structlog

from slot_expiration.domain.text import excerpt
from slot_expiration.expiry import (
    BatchCommitted,
    BatchResult,
    ClockCompared,
    CycleEnded,
    CycleResult,
    CycleStarted,
    DrainProgress,
    DrainStarted,
    DrainThrottled,
    StandbysNotJudged,
    StandbysUnseen,
    ThrottleReason,
    describe,
    sqlstate_of,
)
from slot_expiration.history.sink import HISTORY_WRITE_FAILED
from slot_expiration.loop import Event, LoopStarted, LoopStopped, LoopStopping, TickSkipped
from slot_expiration.loop.events import SINK_FAILED
from slot_expiration.options import LogFormat
from slot_expiration.options.settings import DEFAULT_MAX_CLOCK_SKEW_SECONDS
from slot_expiration.telemetry.traces import add_trace_id

# A drain held back by a standby says so again after this much more waiting.
HELD_LOG_EVERY_SECONDS: Final = 10.0
# What to do when a drain cannot judge the standbys' lag (drain.standbys_unseen).
UNSEEN_ADVICE: Final = {
    StandbysUnseen.NOT_GRANTED: "the worker's role may not run slot_expiration_standbys(), "
    "so a drain cannot judge the standbys' lag: run `slot-expiration grant` (and "
    "`slot-expiration migrate` first if the schema is older), or set "
    "--max-replica-lag-seconds 0",
    StandbysUnseen.OWNER_BLIND: "slot_expiration_standbys() runs with the rights of the role "
    "that ran migrate, which cannot see the standbys' positions, so a drain cannot judge "
    "their lag: GRANT pg_read_all_stats TO that role (a superuser can), or set "
    "--max-replica-lag-seconds 0",
}


class LogEvent:
    """Event names are a contract with dashboards and log queries: never rename one."""

    CYCLE_STARTED: Final = "cycle.started"
    BATCH_SELECTED: Final = "batch.selected"
    DRAIN_STARTED: Final = "drain.started"
    ITEM_FAILED: Final = "item.failed"
    CYCLE_COMPLETED: Final = "cycle.completed"
    CYCLE_FAILED: Final = "cycle.failed"
    CLOCK_BEHIND: Final = "clock.behind"
    TICK_SKIPPED: Final = "tick.skipped"
    WORKER_STARTED: Final = "worker.started"
    WORKER_STOPPING: Final = "worker.stopping"
    WORKER_STOPPED: Final = "worker.stopped"
    ENDPOINT_SERVING: Final = "endpoint.serving"
    SCHEMA_AHEAD: Final = "schema.ahead"
    SCHEMA_BEHIND: Final = "schema.behind"
    START_CHECK_DEFERRED: Final = "start.check_deferred"
    UNKNOWN_VARIABLE: Final = "options.unknown_variable"
    UNSUPPORTED_EXPORTER: Final = "traces.unsupported_exporter"
    NATIVE_STDERR: Final = "native.stderr"  # a line libpq (native code) wrote to stderr
    HISTORY_WRITE_FAILED: Final = HISTORY_WRITE_FAILED
    SINK_FAILED: Final = SINK_FAILED
    DRAIN_THROTTLED: Final = "drain.throttled"
    STANDBYS_UNSEEN: Final = "drain.standbys_unseen"
    UI_SERVING: Final = "ui.serving"


class LogSink:
    """Writes one log event per fact; never one per expired slot."""

    def __init__(
        self,
        logger: structlog.typing.FilteringBoundLogger | None = None,
        max_clock_skew_seconds: float = DEFAULT_MAX_CLOCK_SKEW_SECONDS,
    ) -> None:
        self._log = logger or structlog.get_logger("slot_expiration")
        self._max_skew = max_clock_skew_seconds
        self._unseen_said: set[StandbysUnseen] = set()  # each reason said once
        self._held: dict[str, float] = {}  # run id -> seconds a standby has held its drain

    def __call__(self, event: Event) -> None:
        match event:
            case CycleStarted(run_id, as_of):
                self._log.info(LogEvent.CYCLE_STARTED, run_id=str(run_id), as_of=as_of.isoformat())
            case ClockCompared(run_id, skew) if skew < -self._max_skew:
                # Ahead fails the cycle (cycle.failed says so); behind only delays expiry.
                self._log.warning(
                    LogEvent.CLOCK_BEHIND, run_id=str(run_id), clock_skew_seconds=round(skew, 3)
                )
            case DrainStarted(run_id, backlog) if backlog > 0:
                # Nothing due is no drain: no line at each idle tick of a replica draining.
                self._log.info(
                    LogEvent.DRAIN_STARTED,
                    run_id=str(run_id),
                    backlog=backlog,
                    backlog_capped=event.capped,
                )
            case BatchCommitted(run_id, batch, drain):
                self._batch(str(run_id), batch, drain)
            case DrainThrottled(run_id, ThrottleReason.REPLICA_LAG, seconds, lag):
                self._held_by_standby(str(run_id), seconds, lag)
            case StandbysNotJudged(_, why) if why not in self._unseen_said:
                self._unseen_said.add(why)
                self._log.warning(
                    LogEvent.STANDBYS_UNSEEN, why=why.value, detail=UNSEEN_ADVICE[why]
                )
            case CycleEnded(result, None):
                self._held.pop(str(result.run_id), None)
                self._completed(result)
            case CycleEnded(result, error) if error is not None:
                self._held.pop(str(result.run_id), None)
                self._failed(result, error)
            case TickSkipped(total):
                self._log.warning(LogEvent.TICK_SKIPPED, skipped_ticks_total=total)
            case LoopStarted(interval_seconds, batch_size):
                self._log.info(
                    LogEvent.WORKER_STARTED,
                    interval_seconds=interval_seconds,
                    batch_size=batch_size,
                )
            case LoopStopping(cycle_in_flight):
                self._log.info(LogEvent.WORKER_STOPPING, cycle_in_flight=cycle_in_flight)
            case LoopStopped():
                self._log.info(LogEvent.WORKER_STOPPED)

    def _held_by_standby(self, run: str, seconds: float, lag: float | None) -> None:
        """A drain waiting for a standby says so when it starts waiting, and every
        HELD_LOG_EVERY_SECONDS of waiting after: not one line per look at the standbys."""
        before = self._held.get(run)
        held = (before or 0.0) + seconds
        self._held[run] = held
        if before is None or held // HELD_LOG_EVERY_SECONDS > before // HELD_LOG_EVERY_SECONDS:
            self._log.warning(
                LogEvent.DRAIN_THROTTLED,
                run_id=run,
                reason=ThrottleReason.REPLICA_LAG.value,
                replica_lag_seconds=None if lag is None else round(lag, 3),
                held_seconds=round(held, 3),
                detail="a streaming standby is further behind than --max-replica-lag-seconds: "
                "the drain waits for it",
            )

    def _batch(self, run: str, batch: BatchResult, drain: DrainProgress | None) -> None:
        self._log.info(
            LogEvent.BATCH_SELECTED,
            run_id=run,
            batch=batch.number,
            count=batch.selected_count,
            **({} if drain is None else _drain_fields(drain)),
        )
        for failure in batch.failures:
            self._log.error(
                LogEvent.ITEM_FAILED,
                run_id=run,
                slot_id=str(failure.slot.id),
                tenant_id=str(failure.slot.tenant_id),
                sqlstate=failure.sqlstate,
                exception=excerpt(failure.message),
                attempts=failure.attempts,
                next_attempt_at=_iso(failure.next_attempt_at),
            )

    def _completed(self, result: CycleResult) -> None:
        # The cycle's own record, as `once --json` prints it: one record, never re-listed.
        self._log.log(result.outcome.log_level, LogEvent.CYCLE_COMPLETED, **result.summary())

    def _failed(self, result: CycleResult, error: BaseException) -> None:
        self._log.log(
            result.outcome.log_level,
            LogEvent.CYCLE_FAILED,
            run_id=str(result.run_id),
            reason=result.outcome.value,
            sqlstate=sqlstate_of(error),
            error_type=type(error).__name__,
            exception=excerpt(describe(error)),
        )


def _drain_fields(drain: DrainProgress) -> dict[str, object]:
    """A drain's progress on its batch's line: what it expired so far, its rate, what is left
    of the count at its start and how long that takes at this rate (at least, when capped)."""
    rate, eta = drain.rows_per_second, drain.eta_seconds
    return {
        "drain_expired": drain.expired,
        "rows_per_second": None if rate is None else round(rate, 1),
        "left": drain.left,
        "eta_seconds": None if eta is None else round(eta, 1),
        "backlog_capped": drain.capped,
    }


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def configure_logging(
    log_format: LogFormat, level: int = logging.INFO, stream: TextIO | None = None
) -> None:
    """Logs go to stderr (or `stream`: a terminal's that keeps a progress bar below the
    lines), one JSON object per line (or readable lines for people).

    Records of the libraries (psycopg's warnings, say) and Python warnings are
    rendered the same way, so every line on stderr is one of our records.
    """
    out = sys.stderr if stream is None else stream
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if log_format is LogFormat.JSON
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        add_trace_id,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    _route_standard_logging(renderer, shared, level, out)


def _route_standard_logging(
    renderer: structlog.typing.Processor,
    shared: list[structlog.typing.Processor],
    level: int,
    out: TextIO,
) -> None:
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        )
    )
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(max(level, logging.WARNING))  # libraries speak only of trouble
    logging.captureWarnings(True)
