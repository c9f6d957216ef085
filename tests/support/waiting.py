"""Waiting for a condition that another session or task brings about, within a deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


async def eventually(
    condition: Callable[[], Awaitable[bool]], timeout_seconds: float = 30.0
) -> None:
    """Poll `condition` until it holds; the deadline only turns a hang into a failure."""
    async with asyncio.timeout(timeout_seconds):
        # Another session's state has no event to wait on: polling is the only way.
        while not await condition():  # noqa: ASYNC110
            await asyncio.sleep(0.02)
