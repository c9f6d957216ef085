"""One cycle under its budget, its end emitted exactly once (the loop's and `once`'s)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from uuid import UUID

import pytest

from slot_expiration.db import TransientStoreError
from slot_expiration.domain import CycleOutcome
from slot_expiration.expiry import CycleFailed, CycleResult, CycleRun, run_cycle
from tests.support.doubles import RecordingSink, empty_result

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


async def test_a_completed_cycle_is_returned_and_emitted_started_then_ended() -> None:
    cycle, recorded = OneCycle(), RecordingSink()

    result = await run_cycle(cycle, recorded, 30.0, AS_OF)

    assert cycle.run_ids == recorded.started == [result.run_id]
    assert result.as_of == AS_OF
    assert recorded.completed == [result]
    assert recorded.failed == []


async def test_a_failing_cycle_ends_once_and_raises_cycle_failed_caused_by_its_error() -> None:
    error = TransientStoreError("connection lost", "08006")
    recorded = RecordingSink()

    with pytest.raises(CycleFailed, match="connection lost") as caught:
        await run_cycle(OneCycle(error), recorded, 30.0, AS_OF)

    (ended,) = recorded.failed
    assert caught.value.ended is ended
    assert caught.value.__cause__ is error
    assert (ended.result.outcome, ended.error, ended.batch_in_flight) == (
        CycleOutcome.FAILED,
        error,
        False,
    )
    assert recorded.completed == []


async def test_any_exception_a_cycle_raises_ends_it_as_failed_never_escaping_raw() -> None:
    recorded = RecordingSink()

    with pytest.raises(CycleFailed) as caught:
        await run_cycle(OneCycle(RuntimeError("a bug")), recorded, 30.0, AS_OF)

    assert caught.value.outcome is CycleOutcome.FAILED
    assert isinstance(caught.value.error, RuntimeError)


async def test_a_cycle_over_budget_is_cancelled_and_raises_budget_exceeded_naming_the_budget() -> (
    None
):
    cycle, recorded = OneCycle(block=True), RecordingSink()

    with pytest.raises(CycleFailed, match=r"0\.05 s") as caught:
        await run_cycle(cycle, recorded, 0.05, AS_OF)  # the injected budget, not a sleep

    assert cycle.cancelled.is_set()
    assert caught.value.outcome is CycleOutcome.BUDGET_EXCEEDED
    assert isinstance(caught.value.error, TimeoutError)
    assert [ended.result.outcome for ended in recorded.failed] == [CycleOutcome.BUDGET_EXCEEDED]
    assert recorded.completed == []


async def test_a_cycle_cancelled_from_outside_ends_interrupted_and_the_cancel_is_re_raised() -> (
    None
):
    cycle, recorded = OneCycle(block=True), RecordingSink()
    task = asyncio.create_task(run_cycle(cycle, recorded, 30.0, AS_OF))
    async with asyncio.timeout(10):  # a safety net, not a timing
        await cycle.entered.wait()

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert cycle.cancelled.is_set()
    (ended,) = recorded.failed
    assert ended.result.outcome is CycleOutcome.INTERRUPTED
    assert isinstance(ended.error, asyncio.CancelledError)
