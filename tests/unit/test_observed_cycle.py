"""One cycle under its budget, reported to the hooks exactly once (the loop's and `once`'s)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from uuid import UUID

import pytest

from slot_expiration.cycle import CycleResult, CycleRun
from slot_expiration.loop import CycleBudgetExceededError, CycleCancelledError, observed_cycle
from tests.support.doubles import RecordingHooks, empty_result

AS_OF = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


class OneCycle:
    """A fake cycle that returns, raises `error`, or blocks until cancelled."""

    def __init__(self, error: BaseException | None = None, *, block: bool = False) -> None:
        self._error = error
        self._block = block
        self.run_ids: list[UUID] = []
        self.entered = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def run(self, run: CycleRun) -> CycleResult:
        self.run_ids.append(run.run_id)
        self.entered.set()
        if self._error is not None:
            raise self._error
        if self._block:
            try:
                await asyncio.Event().wait()  # never set
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        return empty_result(run)


async def test_a_completed_cycle_is_returned_and_reported_started_then_completed() -> None:
    cycle, hooks = OneCycle(), RecordingHooks()

    result = await observed_cycle(cycle, hooks, 30.0, AS_OF)

    assert cycle.run_ids == hooks.started == [result.run_id]
    assert result.as_of == AS_OF
    assert hooks.completed == [result]
    assert hooks.failed == []


async def test_a_failing_cycle_is_reported_once_and_its_error_re_raised() -> None:
    error = RuntimeError("connection lost")
    hooks = RecordingHooks()

    with pytest.raises(RuntimeError, match="connection lost"):
        await observed_cycle(OneCycle(error), hooks, 30.0, AS_OF)

    assert hooks.failed == [(error, False)]
    assert hooks.completed == []


async def test_a_cycle_over_budget_is_cancelled_and_raises_budget_exceeded_naming_the_budget() -> (
    None
):
    cycle, hooks = OneCycle(block=True), RecordingHooks()

    with pytest.raises(CycleBudgetExceededError, match=r"0\.05 s") as caught:
        await observed_cycle(cycle, hooks, 0.05, AS_OF)  # the injected budget, not a sleep

    assert cycle.cancelled.is_set()
    assert isinstance(caught.value, TimeoutError)
    assert hooks.failed == [(caught.value, True)]
    assert hooks.completed == []


async def test_a_cycle_cancelled_from_outside_is_reported_as_cancelled_and_re_raised() -> None:
    cycle, hooks = OneCycle(block=True), RecordingHooks()
    task = asyncio.create_task(observed_cycle(cycle, hooks, 30.0, AS_OF))
    async with asyncio.timeout(10):  # a safety net, not a timing
        await cycle.entered.wait()

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert cycle.cancelled.is_set()
    assert len(hooks.failed) == 1
    error, budget_exceeded = hooks.failed[0]
    assert isinstance(error, CycleCancelledError)
    assert budget_exceeded is False
