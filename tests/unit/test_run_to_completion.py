"""The shield around a step that ends a transaction: it runs to its end whatever the caller's
cancellations, asks the server to stop a statement once, and never loses the cancellation."""

from __future__ import annotations

import asyncio

import pytest

from slot_expiration.db.session import run_to_completion


class Step:
    """A step that ends when the test says, with a result or an error."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.error: BaseException | None = None

    async def __call__(self) -> str:
        await self.release.wait()
        if self.error is not None:
            raise self.error
        return "committed"


async def _never_aborted() -> None:
    raise AssertionError("aborted")


async def test_a_step_left_alone_returns_its_result_and_no_cancellation() -> None:
    step = Step()
    step.release.set()

    assert await run_to_completion(step(), _never_aborted) == ("committed", False)


async def test_a_cancellation_waits_for_the_step_asks_the_server_once_and_is_reported() -> None:
    step, interrupts = Step(), []

    async def interrupt() -> None:
        interrupts.append("cancel sent")
        step.release.set()  # the server answers the cancel: the step ends

    caller = asyncio.create_task(run_to_completion(step(), _never_aborted, interrupt=interrupt))
    await asyncio.sleep(0)  # the caller waits on the step
    caller.cancel()
    await asyncio.sleep(0)
    caller.cancel()  # a second cancellation asks nothing more

    assert await caller == ("committed", True)
    assert interrupts == ["cancel sent"]


async def test_a_step_that_fails_after_a_cancellation_raises_the_cancellation_not_its_error() -> (
    None
):
    step = Step()
    step.error = RuntimeError("canceling statement due to user request")

    async def interrupt() -> None:
        step.release.set()

    caller = asyncio.create_task(run_to_completion(step(), _never_aborted, interrupt=interrupt))
    await asyncio.sleep(0)
    caller.cancel()

    with pytest.raises(asyncio.CancelledError) as cancelled:
        await caller
    assert isinstance(cancelled.value.__cause__, RuntimeError)


async def test_a_step_that_fails_alone_raises_its_own_error() -> None:
    step = Step()
    step.error = RuntimeError("rejected")
    step.release.set()

    with pytest.raises(RuntimeError, match="rejected"):
        await run_to_completion(step(), _never_aborted)
