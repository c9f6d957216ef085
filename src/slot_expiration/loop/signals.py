"""The one place that turns SIGTERM and SIGINT into a graceful stop."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignal:
    """First request: stop after the cycle in flight. Second: abandon it (roll back)."""

    def __init__(self) -> None:
        self.requested = asyncio.Event()
        self.forced = asyncio.Event()

    async def pause(self, seconds: float) -> None:
        """Wait `seconds`, or less if a stop is requested meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.requested.wait(), seconds)

    def request(self) -> None:
        if self.requested.is_set():
            self.forced.set()
        self.requested.set()


@contextmanager
def _on_stop_signals(callback: Callable[[], object]) -> Iterator[None]:
    """Route SIGTERM/SIGINT to `callback` on the running loop, then restore the old handlers."""
    loop = asyncio.get_running_loop()
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, callback)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, handler)


def stop_on_signals(stop: StopSignal) -> AbstractContextManager[None]:
    """For the polling loop: a signal asks for a graceful stop (a second one forces it)."""
    return _on_stop_signals(stop.request)


def cancel_on_signals() -> AbstractContextManager[None]:
    """For a single cycle (`once`): a signal cancels it, so its batch rolls back at
    once and its row locks are released, instead of the process dying mid-query."""
    task = asyncio.current_task()
    assert task is not None, "cancel_on_signals needs a running task"
    return _on_stop_signals(task.cancel)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Outside the loop, let SIGTERM unwind like Ctrl-C so `finally` blocks still run.

    The demo relies on it to stop its embedded server whatever stops the demo.
    """
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
