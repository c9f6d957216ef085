"""The cycle history as a hooks sink: one row per cycle, written after it ended.

The sink follows each cycle (its start, the batches that committed, the backlog
and clock it measured) and, once the cycle completed or failed, hands its record
to `write` in a task of its own: the loop never waits for it, and a write that
fails (a failed cycle may have left the database unreachable, a role may lack the
grant) is logged as `history.write_failed` and forgotten. It never fails a cycle.
`drain` waits a bounded time for the writes still in flight, at shutdown.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final
from uuid import UUID

import structlog

from slot_expiration.cycle import (
    CycleResult,
    CycleTally,
    FailureKind,
    StopReason,
    failure_kind,
    sqlstate_of,
)
from slot_expiration.cycle.result import BatchResult
from slot_expiration.domain import utc_now
from slot_expiration.store import SlotStoreError
from slot_expiration.store.history_store import CycleOutcome, CycleRecord
from slot_expiration.telemetry.hooks import NoHooks
from slot_expiration.telemetry.logs import Event

# How long one write (connect, insert, purge) may take; past it the row is dropped.
WRITE_TIMEOUT_SECONDS: Final = 5.0
# How long a stopping worker waits for the writes in flight (its last cycle's row): a
# graceful stop's worst case counts it (tests/deploy/timing.py).
DRAIN_TIMEOUT_SECONDS: Final = WRITE_TIMEOUT_SECONDS + 1.0
# A database message can be long; the history keeps its start (the log has it whole).
MAX_ERROR_CHARS: Final = 500

OUTCOMES: Final = {
    FailureKind.TRANSIENT: CycleOutcome.FAILED,
    FailureKind.STOPPED: CycleOutcome.INTERRUPTED,
    FailureKind.BUDGET_EXCEEDED: CycleOutcome.BUDGET_EXCEEDED,
    FailureKind.MISCONFIGURED: CycleOutcome.MISCONFIGURED,
    FailureKind.CLOCK_SKEW: CycleOutcome.CLOCK_SKEW,
}
STOP_REASONS: Final = {
    FailureKind.STOPPED: StopReason.INTERRUPTED,
    FailureKind.BUDGET_EXCEEDED: StopReason.BUDGET_EXCEEDED,
}

Write = Callable[[CycleRecord], Awaitable[object]]


def default_instance() -> str:
    """hostname:pid: tells replicas apart, and restarts of one."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(slots=True)
class _Following:
    """What the sink knows of a cycle in progress."""

    tally: CycleTally
    started_at: datetime
    started_monotonic: float
    backlog: int | None = None
    clock_skew_seconds: float | None = None


@dataclass(slots=True)
class _Writes:
    pending: set[asyncio.Task[None]] = field(default_factory=set)


class HistoryHooks(NoHooks):
    """Records each cycle of this worker instance in the history."""

    def __init__(
        self,
        write: Write,
        instance: str,
        *,
        clock: Callable[[], datetime] = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
        timeout_seconds: float = WRITE_TIMEOUT_SECONDS,
    ) -> None:
        self._write = write
        self.instance = instance
        self._clock = clock
        self._monotonic = monotonic
        self._timeout_seconds = timeout_seconds
        self._cycles: dict[UUID, _Following] = {}
        self._writes = _Writes()
        self._log = structlog.get_logger("slot_expiration")

    def cycle_started(self, run_id: UUID, as_of: datetime) -> None:
        following = _Following(CycleTally(run_id, as_of), self._clock(), self._monotonic())
        self._cycles[run_id] = following

    def clock_compared(self, run_id: UUID, skew_seconds: float) -> None:
        if (following := self._cycles.get(run_id)) is not None:
            following.clock_skew_seconds = skew_seconds

    def batch_completed(self, run_id: UUID, batch: BatchResult) -> None:
        if (following := self._cycles.get(run_id)) is not None:
            following.tally.add(batch)

    def backlog_measured(self, run_id: UUID, backlog: int) -> None:
        if (following := self._cycles.get(run_id)) is not None:
            following.backlog = backlog

    def cycle_completed(self, result: CycleResult) -> None:
        following = self._cycles.pop(result.run_id, None)
        if following is None:
            return
        self._submit(
            CycleRecord(
                run_id=result.run_id,
                instance=self.instance,
                as_of=result.as_of,
                started_at=following.started_at,
                ended_at=self._clock(),
                outcome=CycleOutcome.SUCCESS,
                stop_reason=result.stop_reason.value,
                expired_count=result.expired_count,
                skipped_locked_count=result.skipped_locked_count,
                failed_count=result.failed_count,
                batches=result.batches,
                duration_ms=result.duration_ms,
                backlog=result.backlog,
                clock_skew_seconds=result.clock_skew_seconds,
            )
        )

    def cycle_failed(self, run_id: UUID, error: BaseException, *, budget_exceeded: bool) -> None:
        following = self._cycles.pop(run_id, None)
        if following is None:
            return
        kind = failure_kind(error, budget_exceeded=budget_exceeded)
        tally = following.tally
        self._submit(
            CycleRecord(
                run_id=run_id,
                instance=self.instance,
                as_of=tally.as_of,
                started_at=following.started_at,
                ended_at=self._clock(),
                outcome=OUTCOMES[kind],
                stop_reason=STOP_REASONS.get(kind, StopReason.FAILED).value,
                expired_count=tally.expired_count,
                skipped_locked_count=tally.skipped_locked_count,
                failed_count=tally.failed_count,
                batches=tally.batches,
                duration_ms=(self._monotonic() - following.started_monotonic) * 1000.0,
                backlog=following.backlog,
                clock_skew_seconds=following.clock_skew_seconds,
                error_type=type(error).__name__,
                sqlstate=sqlstate_of(error),
                error=(str(error) or type(error).__name__)[:MAX_ERROR_CHARS],
            )
        )

    def _submit(self, record: CycleRecord) -> None:
        task = asyncio.get_running_loop().create_task(self._written(record))
        self._writes.pending.add(task)
        task.add_done_callback(self._writes.pending.discard)

    async def _written(self, record: CycleRecord) -> None:
        try:
            async with asyncio.timeout(self._timeout_seconds):
                await self._write(record)
        except (SlotStoreError, TimeoutError, OSError) as exc:
            # The cycle's own outcome is logged and counted already; only its row is lost.
            self._log.warning(
                Event.HISTORY_WRITE_FAILED,
                run_id=str(record.run_id),
                outcome=record.outcome.value,
                error_type=type(exc).__name__,
                sqlstate=exc.sqlstate if isinstance(exc, SlotStoreError) else None,
                exception=str(exc) or f"no answer within {self._timeout_seconds:g} s",
            )

    @property
    def writing(self) -> int:
        """Writes still in flight."""
        return len(self._writes.pending)

    async def drain(self, timeout_seconds: float | None = None) -> None:
        """Wait for the writes in flight (at most `timeout_seconds`, by default one write's
        own bound); whatever is left then is cancelled."""
        pending = set(self._writes.pending)
        if not pending:
            return
        limit = (
            self._timeout_seconds + DRAIN_TIMEOUT_SECONDS - WRITE_TIMEOUT_SECONDS
            if timeout_seconds is None
            else timeout_seconds
        )
        _, late = await asyncio.wait(pending, timeout=limit)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
