"""One cycle under its budget, reported to the hooks: shared by the loop and `once`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime
from typing import Protocol
from uuid import uuid4

from slot_expiration.cycle import CycleResult, CycleRun
from slot_expiration.telemetry import CycleHooks


class Cycle(Protocol):
    async def run(self, run: CycleRun) -> CycleResult: ...


class CycleBudgetExceededError(TimeoutError):
    """The cycle ran past its budget; it was abandoned and its batch rolled back."""


class CycleCancelledError(Exception):
    """The cycle was abandoned at shutdown; its batch rolled back whole."""


def _never() -> bool:
    return False


async def observed_cycle(
    cycle: Cycle,
    hooks: CycleHooks,
    budget_seconds: float,
    as_of: datetime,
    stop_requested: Callable[[], bool] = _never,
) -> CycleResult:
    """Run one cycle within `budget_seconds`; every outcome reaches the hooks exactly once.

    Batches a cycle committed before it failed were reported to the hooks as
    they committed; only the batch in flight rolls back.
    """
    run = CycleRun(
        run_id=uuid4(),
        as_of=as_of,
        observer=hooks,
        stop_requested=stop_requested,
        deadline=time.monotonic() + budget_seconds,
    )
    hooks.cycle_started(run.run_id, as_of)
    budget = asyncio.timeout(budget_seconds)
    try:
        async with budget:
            result = await cycle.run(run)
    except asyncio.CancelledError:
        hooks.cycle_failed(run.run_id, CycleCancelledError("stopped during the cycle"),
                           budget_exceeded=False)  # fmt: skip
        raise
    except Exception as exc:
        if not budget.expired():
            hooks.cycle_failed(run.run_id, exc, budget_exceeded=False)
            raise
        overrun = CycleBudgetExceededError(
            f"the cycle ran past its budget of {budget_seconds:g} s and its batch in flight "
            "was rolled back"
        )
        hooks.cycle_failed(run.run_id, overrun, budget_exceeded=True)
        raise overrun from exc
    hooks.cycle_completed(result)
    return result
