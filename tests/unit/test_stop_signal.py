"""The stop signal: the first request asks for a graceful stop, the second forces it."""

from __future__ import annotations

import asyncio

from slot_expiration.loop import StopSignal


async def test_a_new_stop_signal_is_neither_requested_nor_forced() -> None:
    stop = StopSignal()

    assert not stop.requested.is_set()
    assert not stop.forced.is_set()


async def test_the_first_request_sets_requested_only() -> None:
    stop = StopSignal()

    stop.request()

    assert stop.requested.is_set()
    assert not stop.forced.is_set()


async def test_the_second_request_sets_forced() -> None:
    stop = StopSignal()

    stop.request()
    stop.request()

    assert stop.requested.is_set()
    assert stop.forced.is_set()


async def test_further_requests_keep_both_set() -> None:
    stop = StopSignal()

    for _ in range(3):
        stop.request()

    assert stop.requested.is_set()
    assert stop.forced.is_set()


async def test_a_pause_ends_as_soon_as_a_stop_is_requested() -> None:
    stop = StopSignal()
    pause = asyncio.create_task(stop.pause(3600))
    await asyncio.sleep(0)  # let the pause start waiting
    assert not pause.done()

    stop.request()

    await asyncio.wait_for(pause, timeout=5)  # the timeout only turns a hang into a failure
    assert stop.requested.is_set()


async def test_a_pause_after_the_stop_returns_at_once() -> None:
    stop = StopSignal()
    stop.request()

    await asyncio.wait_for(stop.pause(3600), timeout=5)
