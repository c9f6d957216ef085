"""Loading the benchmark's slot table, set-based, and putting its backlog back between runs."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from benchmarks.plan import TableShape
from benchmarks.store import BenchStore, SlotTableSpec, TableStats

# Of the rows that are not the backlog: this share is history (before the
# backlog), the rest future slots. "Mostly future slots", as a calendar is.
HISTORY_SHARE = 0.3
_GOLDEN = (math.sqrt(5) - 1) / 2  # a stride near total * 0.618 scatters consecutive rows


def reference_time(now: datetime) -> datetime:
    """The benchmark's AsOf: now, down to the 30-minute grid the slots are published on."""
    now = now.astimezone(UTC)
    return now.replace(minute=now.minute - now.minute % 30, second=0, microsecond=0)


def coprime_stride(total: int) -> int:
    """A multiplier that permutes 0..total-1 (p -> p * stride mod total) and scatters them."""
    if total <= 2:
        return 1
    stride = max(2, round(total * _GOLDEN))
    while math.gcd(stride, total) != 1:
        stride += 1
    return stride


def table_spec(shape: TableShape, as_of: datetime) -> SlotTableSpec:
    rest = shape.slots - shape.due
    return SlotTableSpec(
        total=shape.slots,
        due=shape.due,
        history=round(rest * HISTORY_SHARE),
        consultants=shape.consultants,
        tenants=shape.tenants,
        stride=coprime_stride(shape.slots),
        as_of=as_of,
    )


@dataclass(frozen=True, slots=True)
class LoadedTable:
    slots: int
    due: int
    by_status: dict[str, int]
    load_seconds: float
    stats: TableStats


async def load_table(store: BenchStore, shape: TableShape, as_of: datetime) -> LoadedTable:
    """Replace the table's rows with a fresh realistic table, vacuumed and analyzed."""
    started = time.perf_counter()
    await store.empty_slots()
    await store.load_slots(table_spec(shape, as_of))
    await store.vacuum_analyze()
    seconds = time.perf_counter() - started
    await store.checkpoint()
    return LoadedTable(
        slots=shape.slots,
        due=await store.count_due(as_of),
        by_status=await store.count_by_status(),
        load_seconds=seconds,
        stats=await store.table_stats(),
    )


async def restore_backlog(store: BenchStore, as_of: datetime) -> int:
    """Put back every row expired since the load, then vacuum and checkpoint: the next
    drain starts from the table as loaded, without the dead tuples of the last one."""
    await store.reset_backlog(as_of)
    await store.vacuum_analyze()
    await store.checkpoint()
    return await store.count_due(as_of)
