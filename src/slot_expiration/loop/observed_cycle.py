"""One cycle under its budget, reported to the hooks: shared by the loop and `once`."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Protocol
from uuid import UUID, uuid4

from slot_expiration.cycle import CycleResult
from slot_expiration.telemetry import CycleHooks


class Cycle(Protocol):
    async def run(self, run_id: UUID, as_of: datetime) -> CycleResult: ...


class CycleBudgetExceededError(TimeoutError):
    """The cycle ran past its budget; it was abandoned and its batch rolled back."""


class CycleCancelledError(Exception):
    """The cycle was abandoned at shutdown; its batch rolled back whole."""


async def observed_cycle(
    cycle: Cycle, hooks: CycleHooks, budget_seconds: float, as_of: datetime
) -> CycleResult:
    """Run one cycle within `budget_seconds`; every outcome reaches the hooks exactly once."""
    run_id = uuid4()
    hooks.cycle_started(run_id, as_of)
    budget = asyncio.timeout(budget_seconds)
    try:
        async with budget:
            result = await cycle.run(run_id, as_of)
    except asyncio.CancelledError:
        hooks.cycle_failed(run_id, CycleCancelledError("stopped during the cycle"),
                           budget_exceeded=False)  # fmt: skip
        raise
    except Exception as exc:
        if not budget.expired():
            hooks.cycle_failed(run_id, exc, budget_exceeded=False)
            raise
        overrun = CycleBudgetExceededError(
            f"the cycle ran past its budget of {budget_seconds:g} s and was rolled back"
        )
        hooks.cycle_failed(run_id, overrun, budget_exceeded=True)
        raise overrun from exc
    hooks.cycle_completed(result)
    return result
