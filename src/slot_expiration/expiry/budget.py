"""One cycle under its budget, its end told exactly once: shared by the loop and `once`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from datetime import datetime
from typing import Any, Final, Protocol

from slot_expiration.db import CommitInDoubtError
from slot_expiration.domain import CycleOutcome
from slot_expiration.expiry.events import CycleEnded, CycleStarted, EmitCycleEvent
from slot_expiration.expiry.failure import CycleFailed, outcome_of
from slot_expiration.expiry.result import CycleResult
from slot_expiration.expiry.run import CycleRun, Stop


class Cycle(Protocol):
    async def run(self, run: CycleRun) -> CycleResult: ...


# Once a cycle is cancelled (budget spent, or shutdown), how long it may take to
# unwind before it is cancelled again. The first cancellation lets the driver ask
# the server to cancel the statement; the second makes it drop the connection at
# once (a dead network answers neither), and the server then rolls back.
CANCEL_GRACE_SECONDS: Final = 2.0


class _BudgetSpentError(TimeoutError):
    """The cycle ran past its budget; it was abandoned and its batch rolled back (or, its
    COMMIT sent and never answered, left in doubt)."""


async def run_cycle(  # noqa: PLR0913 - the clock's two facts and the stop travel apart
    cycle: Cycle,
    emit: EmitCycleEvent,
    budget_seconds: float,
    as_of: datetime,
    stop: Stop | None = None,
    *,
    as_of_is_now: bool = False,
) -> CycleResult:
    """Run one cycle within `budget_seconds` and emit CycleEnded exactly once, however it
    ends. A cycle that fails raises CycleFailed (what its committed batches did, why, and
    whether a batch was in flight: it rolled back); a cancellation is re-raised as is, once
    CycleEnded (interrupted) was emitted. However the network behaves, a cycle ends within
    its budget plus a few grace seconds.
    """
    started = time.monotonic()
    run = CycleRun(
        as_of=as_of,
        as_of_is_now=as_of_is_now,
        emit=emit,
        stop_requested=_never if stop is None else stop.requested.is_set,
        pause=asyncio.sleep if stop is None else stop.pause,
        deadline=started + budget_seconds,
    )
    emit(CycleStarted(run.run_id, as_of))
    try:
        result = await _within_budget(cycle.run(run), budget_seconds)
    except asyncio.CancelledError as cancelled:
        emit(_ended(run, CycleOutcome.INTERRUPTED, cancelled, started))
        raise
    except _BudgetSpentError as overrun:
        ended = _ended(run, CycleOutcome.BUDGET_EXCEEDED, overrun, started)
        emit(ended)
        raise CycleFailed(ended) from overrun
    except Exception as exc:
        ended = _ended(run, outcome_of(exc), exc, started)
        emit(ended)
        raise CycleFailed(ended) from exc
    emit(CycleEnded(result))
    return result


def _never() -> bool:
    return False


def _ended(
    run: CycleRun, outcome: CycleOutcome, error: BaseException, started: float
) -> CycleEnded:
    progress = run.progress
    elapsed_ms = (time.monotonic() - started) * 1000.0
    return CycleEnded(progress.result(outcome, elapsed_ms), error, progress.batch_in_flight)


async def _within_budget(work: Coroutine[Any, Any, CycleResult], budget: float) -> CycleResult:
    task = asyncio.ensure_future(work)
    try:
        await asyncio.wait({task}, timeout=budget)
    except asyncio.CancelledError:
        await _unwind(task)
        raise
    if task.done():
        return task.result()
    if await _unwind(task):
        raise asyncio.CancelledError  # stopped while it unwound: the stop wins
    error = None if task.cancelled() else task.exception()
    # A batch whose COMMIT was sent and never answered may have committed at the server.
    fate = (
        "may or may not have committed"
        if isinstance(error, CommitInDoubtError)
        else ("was rolled back")
    )
    detail = "" if error is None else f" ({error})"
    raise _BudgetSpentError(
        f"the cycle ran past its budget of {budget:g} s and its batch in flight {fate}{detail}"
    ) from error


async def _unwind(task: asyncio.Task[CycleResult]) -> bool:
    """Cancel the cycle and wait until it has rolled back and closed its connection.

    A cancellation of our own meanwhile only hastens it (one more cancel of the
    cycle); it is reported by returning True once the cycle is gone.
    """
    interrupted = False
    for grace_seconds in (CANCEL_GRACE_SECONDS, CANCEL_GRACE_SECONDS):
        if task.done():
            break
        task.cancel()
        try:
            await asyncio.wait({task}, timeout=grace_seconds)
        except asyncio.CancelledError:
            interrupted = True
    # The store bounds its own last waits (COMMIT, ROLLBACK) after a cancellation.
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            interrupted = True
            task.cancel()
    return interrupted
