"""One cycle under its budget, reported to the hooks: shared by the loop and `once`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from datetime import datetime
from typing import Any, Protocol
from uuid import uuid4

from slot_expiration.cycle import CycleCancelledError, CycleResult, CycleRun
from slot_expiration.loop.signals import StopSignal
from slot_expiration.telemetry import CycleHooks


class Cycle(Protocol):
    async def run(self, run: CycleRun) -> CycleResult: ...


class CycleBudgetExceededError(TimeoutError):
    """The cycle ran past its budget; it was abandoned and its batch rolled back."""

    def __init__(self, message: str, budget_seconds: float) -> None:
        super().__init__(message)
        self.budget_seconds = budget_seconds


# Once a cycle is cancelled (budget spent, or shutdown), how long it may take to
# unwind before it is cancelled again. The first cancellation lets the driver ask
# the server to cancel the statement; the second makes it drop the connection at
# once (a dead network answers neither), and the server then rolls back.
CANCEL_GRACE_SECONDS = 2.0


def _never() -> bool:
    return False


async def observed_cycle(  # noqa: PLR0913 - the clock's two facts and the stop travel apart
    cycle: Cycle,
    hooks: CycleHooks,
    budget_seconds: float,
    as_of: datetime,
    stop: StopSignal | None = None,
    *,
    as_of_is_now: bool = False,
) -> CycleResult:
    """Run one cycle within `budget_seconds`; every outcome reaches the hooks exactly once.

    Batches a cycle committed before it failed were reported to the hooks as
    they committed; only the batch in flight rolls back. However the network
    behaves, a cycle ends within its budget plus a few grace seconds.
    """
    run = CycleRun(
        run_id=uuid4(),
        as_of=as_of,
        as_of_is_now=as_of_is_now,
        observer=hooks,
        stop_requested=_never if stop is None else stop.requested.is_set,
        pause=asyncio.sleep if stop is None else stop.pause,
        deadline=time.monotonic() + budget_seconds,
    )
    hooks.cycle_started(run.run_id, as_of)
    try:
        result = await _within_budget(cycle.run(run), budget_seconds)
    except asyncio.CancelledError:
        hooks.cycle_failed(run.run_id, CycleCancelledError("stopped during the cycle"),
                           budget_exceeded=False)  # fmt: skip
        raise
    except CycleBudgetExceededError as overrun:
        hooks.cycle_failed(run.run_id, overrun, budget_exceeded=True)
        raise
    except Exception as exc:
        hooks.cycle_failed(run.run_id, exc, budget_exceeded=False)
        raise
    hooks.cycle_completed(result)
    return result


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
    detail = "" if task.cancelled() else f" ({task.exception()})"
    raise CycleBudgetExceededError(
        f"the cycle ran past its budget of {budget:g} s and its batch in flight "
        f"was rolled back{detail}",
        budget,
    )


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
