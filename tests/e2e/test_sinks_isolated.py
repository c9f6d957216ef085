"""An observer never breaks the observed, on the installed command: `run` with its stderr on a
full device (every log line fails to write) keeps expiring slots cycle after cycle, and
stops gracefully on SIGTERM, exit 0."""

from __future__ import annotations

import asyncio
import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest

from slot_expiration.domain import SlotStatus
from tests.e2e.command import PROGRAM, clean_env, eventually
from tests.support.database import SlotDatabase
from tests.support.slots import DUE_BACKLOG

pytestmark = pytest.mark.e2e

BATCH = 40
BACKLOG = 3 * BATCH


async def test_run_with_stderr_on_a_full_device_keeps_expiring_then_stops_gracefully(
    db: SlotDatabase,
) -> None:
    await db.conn.execute(DUE_BACKLOG, {"now": datetime.now(UTC), "count": BACKLOG})
    args = ("run", "--interval-seconds", "1", "--batch-size", str(BATCH), "--metrics-addr", "")
    with Path("/dev/full").open("wb") as full:  # noqa: ASYNC230 - a device: never blocks
        process = await asyncio.create_subprocess_exec(
            str(PROGRAM),
            *args,
            "--database-url",
            db.url,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=full,
            env=clean_env(),
        )
    try:

        async def drained() -> bool:
            statuses = await db.statuses()
            return list(statuses.values()).count(SlotStatus.EXPIRED) == BACKLOG

        # Three cycles, each logging its start, batch and end into the full device.
        await eventually(drained, "every due slot expired, the log failing throughout", 60)
        alive = process.returncode is None
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()

    assert alive
    assert code == 0
