"""The demo: a seeded database, the real polling loop for a few cycles, before and after."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import TextIO

from slot_expiration.demo.seed import (
    DemoMix,
    DemoSlot,
    demo_slots,
    publications,
    publishing_clock,
)
from slot_expiration.domain import Slot, SlotRuleError, SlotStatus, utc_now
from slot_expiration.expiry import CycleEnded
from slot_expiration.loop import Event, LoopStarted, LoopStopped, StopSignal, TickSkipped
from slot_expiration.options import WorkerOptions
from slot_expiration.slots import SlotOperations
from slot_expiration.worker import run_worker, store_factory


@dataclass(frozen=True, slots=True)
class DemoPlan:
    max_cycles: int = 6
    mix: DemoMix = field(default_factory=DemoMix)
    seed: int | None = None  # None: new agencies and consultants on every run


class Progress:
    """A sink that prints one line per cycle and asks the loop to stop once the backlog
    is gone."""

    def __init__(self, out: TextIO, backlog: int, plan: DemoPlan, stop: StopSignal) -> None:
        self._out, self._backlog, self._plan, self._stop = out, backlog, plan, stop
        self._cycles = 0

    def __call__(self, event: Event) -> None:
        match event:
            case CycleEnded(result, None):
                self._cycles += 1
                self._backlog -= result.expired_count
                self._print(
                    f"  cycle {self._cycles}: expired {result.expired_count:>4}, "
                    f"skipped (locked) {result.skipped_locked_count}, "
                    f"{result.duration_ms:7.1f} ms, backlog left {self._backlog}"
                )
                self._maybe_stop()
            case CycleEnded(_, error):
                self._cycles += 1
                self._print(f"  cycle {self._cycles}: failed ({error}); the next tick retries")
                self._maybe_stop()
            case TickSkipped(total):
                self._print(f"  tick skipped while a cycle ran ({total} so far)")
            case LoopStarted(interval_seconds, batch_size):
                self._print(
                    f"worker: a cycle every {interval_seconds:g} s, batches of {batch_size}"
                )
            case LoopStopped():
                self._print("worker: stopped")

    def _maybe_stop(self) -> None:
        if self._backlog <= 0 or self._cycles >= self._plan.max_cycles:
            self._stop.request()

    def _print(self, line: str) -> None:
        print(line, file=self._out, flush=True)


async def run_demo(options: WorkerOptions, plan: DemoPlan, out: TextIO) -> None:
    url = options.require_database_url()
    from slot_expiration.schema.migrate import upgrade  # noqa: PLC0415 - Alembic only now

    await asyncio.to_thread(upgrade, url)
    now = utc_now()
    slots = demo_slots(now, plan.mix, plan.seed if plan.seed is not None else _fresh_seed())
    published = await publish_demo_slots(url, slots, publishing_clock(now), out)
    async with store_factory(options)() as store, store.transaction():
        before = await store.count_by_status()
        backlog = await store.count_backlog(now)
    print(f"seeded {len(slots)} slots; {backlog} are Available with a past start", file=out)
    stop = StopSignal()

    def serving(url: str) -> None:
        print(f"worker: metrics on {url}/metrics (also /healthz, /readyz)", file=out, flush=True)

    await run_worker(options, [Progress(out, backlog, plan, stop)], stop, serving)
    async with store_factory(options)() as store, store.transaction():
        after = await store.count_by_status()
    print_counts(before, after, out)
    await show_a_booking_after_expiry(url, published, out)


async def publish_demo_slots(
    url: str, slots: list[DemoSlot], clock: datetime, out: TextIO
) -> dict[DemoSlot, Slot]:
    """Publish the demo's slots through the publish operation, its clock set back so that
    slots in the past can exist, then book and archive some with the same clock."""
    published: dict[DemoSlot, Slot] = {}
    async with SlotOperations.connect(url, now=lambda: clock) as ops:
        for batch in publications(slots):
            first = batch[0]
            created = await ops.publish(
                first.tenant_id, first.consultant_id, [slot.range for slot in batch]
            )
            published.update(zip(batch, created, strict=True))
        for wanted, slot in published.items():
            if wanted.status is SlotStatus.BOOKED:
                await ops.book(slot.tenant_id, slot.id)
            elif wanted.status is SlotStatus.ARCHIVED:
                await ops.archive(slot.tenant_id, slot.id)
    booked = sum(s.status is SlotStatus.BOOKED for s in slots)
    archived = sum(s.status is SlotStatus.ARCHIVED for s in slots)
    print(
        f"published {len(slots)} slots for {len({s.consultant_id for s in slots})} consultants "
        f"through the publish operation, its clock set back to {clock:%Y-%m-%d %H:%M} UTC; "
        f"booked {booked}, archived {archived}",
        file=out,
    )
    return published


async def show_a_booking_after_expiry(
    url: str, published: dict[DemoSlot, Slot], out: TextIO
) -> None:
    """Book the oldest slot left Available (the first the worker expires) now, as a
    customer would, and show what book-slot answers."""
    left = [slot for wanted, slot in published.items() if wanted.status is SlotStatus.AVAILABLE]
    oldest = min(left, key=lambda slot: (slot.start_at, slot.id))
    async with SlotOperations.connect(url) as ops:
        try:
            booked = await ops.book(oldest.tenant_id, oldest.id)
        except SlotRuleError as refused:
            answer = f"refused, {refused.describe()}"
        else:
            answer = f"booked (version {booked.version})"
    print(f"\nbooking the oldest past slot {oldest.id} now: {answer}", file=out)


def _fresh_seed() -> int:
    # New agencies and consultants on every run, so the demo can run again on the same
    # database without its slots overlapping the previous run's.
    return secrets.randbits(32)


def print_counts(before: dict[SlotStatus, int], after: dict[SlotStatus, int], out: TextIO) -> None:
    print(f"\n{'status':<10} {'before':>7} {'after':>7}", file=out)
    for status in SlotStatus:
        print(f"{status.value:<10} {before[status]:>7} {after[status]:>7}", file=out)
