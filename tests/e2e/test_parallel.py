"""Two `once` processes over one backlog: SKIP LOCKED gives every row to exactly one."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack

import pytest

from slot_expiration.domain import SlotStatus
from tests.e2e.command import Running, eventually, started
from tests.support.database import SlotDatabase
from tests.support.slots import AS_OF, past_slots

pytestmark = pytest.mark.e2e


async def test_two_once_processes_started_together_expire_every_row_exactly_once(
    db: SlotDatabase, secret_url: str
) -> None:
    slots = await db.insert(past_slots(600))
    await db.install_gate_trigger()
    await db.close_gate()
    args = ("once", "--json", "--batch-size", "300", "--as-of", AS_OF.isoformat())

    async with AsyncExitStack() as stack:
        workers: list[Running] = [
            await stack.enter_async_context(started(*args, "--database-url", secret_url))
            for _ in range(2)
        ]
        # Both hold their batch's row locks and wait on the gate inside their UPDATE.
        await eventually(
            lambda: _all_waiting(db, workers),
            "both workers waiting on the gate",
        )
        await db.open_gate()
        done = [await worker.wait() for worker in workers]

    for finished in done:
        assert finished.returncode == 0, finished.describe()
    summaries = [json.loads(finished.stdout) for finished in done]
    assert [summary["expired_count"] for summary in summaries] == [300, 300]
    # The second to lock passed over the first one's rows, and said so.
    assert max(summary["skipped_locked_count"] for summary in summaries) > 0
    rows = await db.rows()
    assert len(rows) == len(slots)
    assert {row.status for row in rows.values()} == {SlotStatus.EXPIRED}
    assert {row.version for row in rows.values()} == {2}  # seeded at 1: updated exactly once
    assert {row.updated_at for row in rows.values()} == {AS_OF}


async def _all_waiting(db: SlotDatabase, workers: list[Running]) -> bool:
    for worker in workers:
        assert not worker.exited, f"exited before the gate opened: {worker.describe()}"
    return await db.worker_sessions(waiting_on_gate=True) == len(workers)
