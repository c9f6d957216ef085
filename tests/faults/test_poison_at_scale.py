"""The issue's operator's scale: 1,500 poison rows (a trigger rejects them, P0001) are the
oldest overdue slots, with 1,000 healthy overdue slots behind them, batch 500.

The healthy backlog drains at the normal rate (500 per cycle: two cycles, as
with no poison at all), and each poison row is retried on its backoff: one
interval after its first failure, then waits doubling up to the one-hour cap.
The cycles run on an injected clock (one every 300 s, no waiting); the `once`
command is shown too, on the real clock, as the operator ran it.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest

from slot_expiration.domain import SlotStatus
from tests.e2e.command import run_command
from tests.faults.clocked import ClockedCycles, Tick
from tests.faults.conftest import Measure
from tests.faults.workers import FaultBooks, Record, events_of, overdue
from tests.support.cycles import default_backoff
from tests.support.database import SlotDatabase
from tests.support.slots import AS_OF, past_slots

pytestmark = pytest.mark.faults

POISON, HEALTHY, BATCH = 1_500, 1_000, 500
# The default backoff (300 s, doubling, at most 3,600 s) on cycles every 300 s:
# failures at t = 0, then retries at 300, 900 (+600), 2,100 (+1,200), 4,500 (+2,400);
# the next wait would be 4,800 s and is capped at 3,600.
RETRIES_AT = [0, 300, 900, 2_100, 4_500]
LAST_CYCLE_AT = 4_500


@pytest.mark.parametrize("poison_rows", [0, POISON], ids=["no-poison", "1500-poison"])
async def test_healthy_rows_behind_poison_drain_at_the_normal_rate_and_poison_waits_its_backoff(
    db: SlotDatabase, record_fault: Record, measure: Measure, poison_rows: int
) -> None:
    slots = await db.insert(past_slots(poison_rows + HEALTHY))
    poison, healthy = slots[:poison_rows], slots[poison_rows:]
    if poison:
        await db.install_poison_trigger([p.id for p in poison], "P0001")
    books = await FaultBooks.open(db, healthy, record_fault)
    worker = ClockedCycles(db.url, BATCH, default_backoff())

    await worker.until(LAST_CYCLE_AT)

    publish(measure, worker, poison_rows)
    if poison:
        audit = books.close(
            await db.rows(),
            [],
            reported=worker.reported_expired,
            fault="1,500 poison rows at the head, 1,000 healthy behind (the scale an operator met)",
            injection="a trigger rejects the 1,500 oldest overdue rows (P0001); batch 500; "
            "cycles every 300 s on an injected clock until t = 4,500 s",
            recovery=None,
            note="healthy: 500 + 500 in the first two cycles, as with no poison; poison rows "
            "stay Available, retried at 300, 900, 2,100 and 4,500 s",
        )
    else:  # the comparison, in the measurements only
        audit = books.audit(await db.rows(), reported=worker.reported_expired)
    expired = [outcome.expired_count for outcome in worker.outcomes]
    assert expired[:2] == [BATCH, BATCH]  # the normal rate: 1,000 rows in two cycles
    assert sum(expired[2:]) == 0
    retries = [tick for tick in worker.ticks if tick.outcome.failed_count]
    assert [tick.seconds for tick in retries] == (RETRIES_AT if poison else [])
    for attempt, tick in enumerate(retries, start=1):
        assert sorted(f.slot.id for f in tick.outcome.failures) == sorted(p.id for p in poison)
        assert {f.attempts for f in tick.outcome.failures} == {attempt}
    capped = worker.ticks[-1].at + timedelta(seconds=3_600)  # 4,800 s uncapped
    assert {(q.attempts, q.next_attempt_at) for q in (await db.quarantine()).values()} == (
        {(len(RETRIES_AT), capped)} if poison else set()
    )
    assert audit.clean, audit.describe()  # poison rows: untouched, still Available


def publish(measure: Measure, worker: ClockedCycles, poison_rows: int) -> None:
    expired = [outcome.expired_count for outcome in worker.outcomes]
    measure(
        "poison-comparison",
        {
            "poison rows at the head": poison_rows,
            "healthy rows expired per cycle (first four cycles)": ", ".join(map(str, expired[:4])),
            "cycles to drain the 1,000 healthy rows": sum(1 for e in expired if e),
            "first cycle took (wall)": f"{worker.ticks[0].wall_seconds * 1000:.0f} ms",
        },
    )
    # Only the cycles that did something are tabled; the others found nothing due.
    for tick in worker.ticks:
        if poison_rows and (tick.outcome.expired_count or tick.outcome.failed_count):
            measure("poison-at-scale", _cycle_row(tick))


def _cycle_row(tick: Tick) -> dict[str, object]:
    failures = tick.outcome.failures
    attempts = sorted({f.attempts for f in failures})
    waits = sorted({f.next_attempt_at for f in failures if f.next_attempt_at})
    return {
        "t (worker clock)": f"{tick.seconds:,} s",
        "healthy rows expired": tick.outcome.expired_count,
        "poison rows tried (all rejected)": tick.outcome.failed_count,
        "their attempt": ", ".join(map(str, attempts)) or "—",
        "next attempt at": ", ".join(f"{int((w - AS_OF).total_seconds()):,} s" for w in waits),
        "cycle took (wall)": f"{tick.wall_seconds * 1000:.0f} ms",
    }


async def test_as_the_operator_ran_it_once_twice_drains_the_healthy_rows_behind_1500_poison(
    db: SlotDatabase, secret_url: str, record_fault: Record, measure: Measure
) -> None:
    slots = await db.insert(overdue(POISON + HEALTHY))
    poison, healthy = slots[:POISON], slots[POISON:]
    await db.install_poison_trigger([p.id for p in poison], "P0001")
    books = await FaultBooks.open(db, healthy, record_fault)
    # The top-up past the poison rows may use half the cycle's budget; here it takes about 3 s.
    # A wide budget keeps a slow machine from cutting it short (that would be the budget
    # doing its job, not the fault this test is about).
    args = (
        "once",
        "--json",
        "--batch-size",
        str(BATCH),
        "--max-cycle-seconds",
        "120",
        "--database-url",
        secret_url,
    )

    runs, summaries = [], []
    for _ in range(3):
        started = time.monotonic()
        done = await run_command(*args, timeout_seconds=60)
        runs.append((done, time.monotonic() - started))
        assert done.returncode == 0, done.describe()
        summaries.append(json.loads(done.stdout))

    for number, ((done, seconds), summary) in enumerate(zip(runs, summaries, strict=True)):
        measure(
            "poison-once-runs",
            {
                "`once` run": number + 1,
                "expired_count": summary["expired_count"],
                "failed_count": summary["failed_count"],
                "ids in the summary": len(summary["failed_slot_ids_sample"]),
                "stdout": f"{len(done.stdout)} bytes",
                "item.failed lines": len(events_of(done, "item.failed")),
                "took (wall, process)": f"{seconds:.1f} s",
            },
        )
    audit = books.close(
        await db.rows(),
        [],
        reported=sum(s["expired_count"] for s in summaries),
        fault="1,500 poison rows at the head, three `once` runs (real clock)",
        injection="a trigger rejects the 1,500 oldest overdue rows (P0001); `once --json "
        "--batch-size 500 --max-cycle-seconds 120` run three times in a row",
        recovery=None,
        note=f"healthy: {' + '.join(str(s['expired_count']) for s in summaries)}; "
        "poison rows quarantined for 300 s after the first run",
    )
    assert [s["expired_count"] for s in summaries] == [BATCH, BATCH, 0]
    assert [s["failed_count"] for s in summaries] == [POISON, 0, 0]
    assert all(len(done.stdout) < 2_000 for done, _ in runs)  # bounded, however many failed
    statuses = await db.statuses()
    assert {statuses[p.id] for p in poison} == {SlotStatus.AVAILABLE}
    assert audit.clean, audit.describe()
