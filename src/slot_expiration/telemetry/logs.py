"""Structured logs: the stable event names the spec asks for, and their setup."""

from __future__ import annotations

import logging
import sys
from datetime import datetime
from typing import Final
from uuid import UUID

import structlog

from slot_expiration.cycle import BatchResult, CycleResult, failure_kind, sqlstate_of
from slot_expiration.options import LogFormat
from slot_expiration.telemetry.hooks import NoHooks
from slot_expiration.telemetry.reasons import FAILURE_REASONS
from slot_expiration.telemetry.traces import add_trace_id


class Event:
    """Event names are a contract with dashboards and log queries: never rename one."""

    CYCLE_STARTED: Final = "cycle.started"
    BATCH_SELECTED: Final = "batch.selected"
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
    UNKNOWN_VARIABLE: Final = "options.unknown_variable"
    HISTORY_WRITE_FAILED: Final = "history.write_failed"
    UI_SERVING: Final = "ui.serving"


class LogHooks(NoHooks):
    """Writes one log event per fact; never one per expired slot."""

    def __init__(
        self,
        logger: structlog.typing.FilteringBoundLogger | None = None,
        max_clock_skew_seconds: float = 30.0,
    ) -> None:
        self._log = logger or structlog.get_logger("slot_expiration")
        self._max_skew = max_clock_skew_seconds

    def cycle_started(self, run_id: UUID, as_of: datetime) -> None:
        self._log.info(Event.CYCLE_STARTED, run_id=str(run_id), as_of=as_of.isoformat())

    def clock_compared(self, run_id: UUID, skew_seconds: float) -> None:
        # Ahead fails the cycle (cycle.failed says so); behind only delays expiry.
        if skew_seconds < -self._max_skew:
            self._log.warning(
                Event.CLOCK_BEHIND, run_id=str(run_id), clock_skew_seconds=round(skew_seconds, 3)
            )

    def batch_completed(self, run_id: UUID, batch: BatchResult) -> None:
        run = str(run_id)
        self._log.info(
            Event.BATCH_SELECTED, run_id=run, batch=batch.number, count=batch.selected_count
        )
        for failure in batch.failures:
            self._log.error(
                Event.ITEM_FAILED,
                run_id=run,
                slot_id=str(failure.slot.id),
                tenant_id=str(failure.slot.tenant_id),
                sqlstate=failure.sqlstate,
                exception=failure.message,
                attempts=failure.attempts,
                next_attempt_at=_iso(failure.next_attempt_at),
            )

    def cycle_completed(self, result: CycleResult) -> None:
        self._log.info(
            Event.CYCLE_COMPLETED,
            run_id=str(result.run_id),
            expired_count=result.expired_count,
            skipped_locked_count=result.skipped_locked_count,
            failed_count=result.failed_count,
            batches=result.batches,
            stop_reason=result.stop_reason.value,
            duration_ms=round(result.duration_ms, 3),
            backlog=result.backlog,
            clock_skew_seconds=_rounded(result.clock_skew_seconds),
        )

    def cycle_failed(self, run_id: UUID, error: BaseException, *, budget_exceeded: bool) -> None:
        kind = failure_kind(error, budget_exceeded=budget_exceeded)
        self._log.error(
            Event.CYCLE_FAILED,
            run_id=str(run_id),
            reason=FAILURE_REASONS[kind],
            error_class=kind.value,
            sqlstate=sqlstate_of(error),
            error_type=type(error).__name__,
            exception=str(error) or type(error).__name__,
        )

    def tick_skipped(self, skipped_ticks_total: int) -> None:
        self._log.warning(Event.TICK_SKIPPED, skipped_ticks_total=skipped_ticks_total)

    def loop_started(self, interval_seconds: float, batch_size: int) -> None:
        self._log.info(
            Event.WORKER_STARTED, interval_seconds=interval_seconds, batch_size=batch_size
        )

    def loop_stopping(self, cycle_in_flight: bool) -> None:
        self._log.info(Event.WORKER_STOPPING, cycle_in_flight=cycle_in_flight)

    def loop_stopped(self) -> None:
        self._log.info(Event.WORKER_STOPPED)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def configure_logging(log_format: LogFormat, level: int = logging.INFO) -> None:
    """Logs go to stderr, one JSON object per line (or readable lines for people).

    Records of the libraries (psycopg's warnings, say) and Python warnings are
    rendered the same way, so every line on stderr is one of our records.
    """
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
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    _route_standard_logging(renderer, shared, level)


def _route_standard_logging(
    renderer: structlog.typing.Processor,
    shared: list[structlog.typing.Processor],
    level: int,
) -> None:
    handler = logging.StreamHandler(sys.stderr)
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
