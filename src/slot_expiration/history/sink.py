"""The cycle history as a sink: one row per cycle, written after it ended.

Once a cycle ended (CycleEnded: its result, however it ended, and why it failed),
the sink hands its record to `write` in a task of its own. Its times are on the
database's clock: the worker's, less the skew the cycle measured at its start (a host
whose clock runs slow must not write its cycles hours in the past, where `status`
would find no recent success). The loop never waits for the write, and a write that
fails (a failed cycle may have left the database unreachable, a role may lack the
grant) is logged as `history.write_failed`, told to `on_written` (the worker's
/readyz says it: a replica that cannot write leaves nothing else of itself), and
forgotten. It never fails a cycle. `drain` waits a bounded time for the writes still in
flight, at shutdown.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

import structlog

from slot_expiration.db import StoreError
from slot_expiration.domain import utc_now
from slot_expiration.domain.text import excerpt
from slot_expiration.expiry import CycleEnded, describe
from slot_expiration.history.store import CycleRecord
from slot_expiration.loop import Event

# How long one write (connect, insert, purge) may take; past it the row is dropped.
WRITE_TIMEOUT_SECONDS: Final = 5.0
# How long a stopping worker waits for the writes in flight (its last cycle's row): a
# graceful stop's worst case counts it (tests/deploy/timing.py).
DRAIN_TIMEOUT_SECONDS: Final = WRITE_TIMEOUT_SECONDS + 1.0

Write = Callable[[CycleRecord], Awaitable[object]]
# The log event of a row that could not be written (telemetry.logs.LogEvent names it too).
HISTORY_WRITE_FAILED: Final = "history.write_failed"
# Told of each row: written (None), or why not.
Written = Callable[[CycleRecord, str | None], None]


# Set from the downward API (metadata.name) by the Kubernetes Deployment of the deploy kit.
POD_NAME_VARIABLE: Final = "POD_NAME"


def default_instance(environ: Mapping[str, str] | None = None) -> str:
    """The pod's name when the deployment gives it, else the host's name and a short random
    suffix: unique per container even where containers share a host name and a pid (two
    containers run with --network=host are both pid 1 on the host's name)."""
    pod = (os.environ if environ is None else environ).get(POD_NAME_VARIABLE, "").strip()
    if pod:
        return pod
    return f"{socket.gethostname()}-{secrets.token_hex(3)}"


@dataclass(slots=True)
class _Writes:
    pending: set[asyncio.Task[None]] = field(default_factory=set)


class HistorySink:
    """Records each cycle of this worker instance in the history."""

    def __init__(
        self,
        write: Write,
        instance: str,
        *,
        clock: Callable[[], datetime] = utc_now,
        timeout_seconds: float = WRITE_TIMEOUT_SECONDS,
        on_written: Written | None = None,
    ) -> None:
        self._write = write
        self._on_written = on_written
        self.instance = instance
        self._clock = clock
        self._timeout_seconds = timeout_seconds
        self._writes = _Writes()
        self._log = structlog.get_logger("slot_expiration")

    def __call__(self, event: Event) -> None:
        if isinstance(event, CycleEnded):
            self._submit(self.record(event))

    def record(self, ended: CycleEnded) -> CycleRecord:
        result, error = ended.result, ended.error
        # The database's clock: the worker's less the skew measured at the cycle's start
        # (none measured, a cycle that failed before reaching the database: the worker's).
        skew = timedelta(seconds=result.clock_skew_seconds or 0.0)
        return CycleRecord.of(
            result,
            instance=self.instance,
            ended_at=self._clock() - skew,
            shift=skew,
            error=error,
            # A database's message, bounded as the log line bounds it.
            error_text=None if error is None else excerpt(describe(error)),
        )

    def _submit(self, record: CycleRecord) -> None:
        task = asyncio.get_running_loop().create_task(self._written(record))
        self._writes.pending.add(task)
        task.add_done_callback(self._writes.pending.discard)

    async def _written(self, record: CycleRecord) -> None:
        try:
            async with asyncio.timeout(self._timeout_seconds):
                await self._write(record)
        except (StoreError, TimeoutError, OSError) as exc:
            # The cycle's own outcome is logged and counted already; only its row is lost.
            sqlstate = exc.sqlstate if isinstance(exc, StoreError) else None
            reason = excerpt(str(exc)) or f"no answer within {self._timeout_seconds:g} s"
            self._log.warning(
                HISTORY_WRITE_FAILED,
                run_id=str(record.run_id),
                outcome=record.outcome.value,
                error_type=type(exc).__name__,
                sqlstate=sqlstate,
                exception=reason,
            )
            self._tell(record, f"{reason} (SQLSTATE {sqlstate})" if sqlstate else reason)
        else:
            self._tell(record, None)

    def _tell(self, record: CycleRecord, error: str | None) -> None:
        if self._on_written is not None:
            self._on_written(record, error)

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
