"""The one place that turns SIGTERM and SIGINT into a graceful stop."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from contextlib import contextmanager

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
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.request)
    try:
        yield
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
