"""The one place that turns SIGTERM and SIGINT into a graceful stop."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignal:
    """First request: stop after the cycle in flight. Second: abandon it (roll back)."""

    def __init__(self) -> None:
        self.requested = asyncio.Event()
        self.forced = asyncio.Event()

    def request(self) -> None:
        if self.requested.is_set():
            self.forced.set()
        self.requested.set()


@contextmanager
def stop_on_signals(stop: StopSignal) -> Iterator[None]:
    """Route SIGTERM/SIGINT to `stop` while the block runs, then restore the defaults."""
    loop = asyncio.get_running_loop()
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.request)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, handler)


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


@contextmanager
def cancel_on_signals() -> Iterator[None]:
    """For a single cycle (`once`): SIGTERM/SIGINT cancel it, so its batch rolls back
    at once and its row locks are released, instead of the process dying mid-query."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None, "cancel_on_signals needs a running task"
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, task.cancel)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, handler)
