"""Section h: a calendar partitioned by month on start_at (pg_partman) against the same
calendar unpartitioned, at a small and a large size.

Each table is a calendar's own, as `migrate` adopts it: the contract's columns, its key
(`(id, start_at)` when partitioned), one index of its own, and the worker's index that
adoption builds on each partition. Its slots start over `months` months up to now and
`future_days` ahead, at the same density on either layout (the same rows, loaded in the
same scattered order: a partition holds its month's rows spread over its own heap).
For each table:

- one batch: section e's clean phase (rounds of a worker cycle of N batches and N bare
  ones, the first after a CHECKPOINT, the rows put back when they run out);
- a drain of `drain_rows` rows by the worker in one cycle and by the bare loop, each
  after a CHECKPOINT: rows per second and WAL per batch (every page's first change
  after a checkpoint writes its full image);
- the worker's same drain again before the next checkpoint (the rows put back without
  one): the WAL a batch writes once its pages already carry their image, which is what
  wider checkpoint spacing buys.

The growth figure: the worker's median batch on the largest partitioned table / on the
smallest, with each round's ratio for the spread; the same for the plain table beside it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from benchmarks.context import BenchContext, BenchError
from benchmarks.dataset import coprime_stride, restore_backlog
from benchmarks.drain_section import DrainRun, drain_run
from benchmarks.growth_section import DueRows, PhaseTiming, timed_phase
from benchmarks.plan import PartitionPlan
from benchmarks.stats import Spread, ratio
from benchmarks.store import SlotTableSpec
from benchmarks.timing import BatchRecorder, bare_batch, worker_cycle
from slot_expiration.db.errors import StoreError
from slot_expiration.schema.migrate import upgrade

_MIB = 1024 * 1024
_DAY = timedelta(days=1)


class Layout(StrEnum):
    PLAIN = "unpartitioned"
    MONTHLY = "partitioned by month"


@dataclass(frozen=True, slots=True)
class PartitionPoint:
    layout: str
    slots: int
    partitions: int  # 0: not partitioned
    due: int
    load_seconds: float  # loading the rows and adopting the table (its indexes built)
    table_mib: float
    indexes_mib: float
    clean: PhaseTiming  # one batch, worker and bare
    worker_drain: DrainRun  # after a CHECKPOINT
    bare_drain: DrainRun  # after a CHECKPOINT
    worker_drain_again: DrainRun  # the same drain before the next checkpoint

    @property
    def wal_kb_per_batch(self) -> float:
        return _kb_per_batch(self.worker_drain)

    @property
    def bare_wal_kb_per_batch(self) -> float:
        return _kb_per_batch(self.bare_drain)

    @property
    def wal_kb_per_batch_again(self) -> float:
        return _kb_per_batch(self.worker_drain_again)


def _kb_per_batch(run: DrainRun) -> float:
    return run.wal_mb * 1000 / run.batches if run.batches else 0.0


@dataclass(frozen=True, slots=True)
class Partitioned:
    months: int
    points: tuple[PartitionPoint, ...]
    not_measured: str = ""  # why the section measured nothing (pg_partman missing)

    def of(self, layout: Layout) -> list[PartitionPoint]:
        return [p for p in self.points if p.layout == layout.value]

    def growth(self, layout: Layout) -> float | None:
        """The worker's median batch on the largest table / on the smallest."""
        points = self.of(layout)
        if len(points) < 2:
            return None
        return ratio(points[-1].clean.worker.median, points[0].clean.worker.median)

    def round_ratios(self, layout: Layout) -> Spread | None:
        points = self.of(layout)
        if len(points) < 2:
            return None
        largest, smallest = points[-1].clean, points[0].clean
        pairs = zip(largest.worker_round_medians, smallest.worker_round_medians, strict=False)
        return Spread.of([ratio(a, b) for a, b in pairs])

    @property
    def monthly_growth(self) -> float | None:
        return self.growth(Layout.MONTHLY)

    @property
    def plain_growth(self) -> float | None:
        return self.growth(Layout.PLAIN)


def first_month(as_of: datetime, months: int) -> datetime:
    """The first day of the month `months - 1` months before AsOf's."""
    index = as_of.year * 12 + as_of.month - 1 - (months - 1)
    return as_of.replace(year=index // 12, month=index % 12 + 1, day=1, hour=0, minute=0)


def calendar_spec(
    plan: PartitionPlan, slots: int, batch_size: int, as_of: datetime
) -> SlotTableSpec:
    """The rows of a table of `slots` slots over the plan's months: the due rows the most
    recent past, the future `future_days` ahead (from a day after AsOf), the rest history,
    the grid's step set so that the past rows (a step per consultant's slot, the due
    rows' and the history's steps each rounded up, see bench_load_slots) start within
    the first month."""
    past = as_of - first_month(as_of, plan.months) - _DAY  # a day to spare at the start
    future = timedelta(days=plan.future_days)
    due = plan.due(slots, batch_size)
    future_rows = round(slots * (future / (past + future)))
    history = slots - due - future_rows
    past_steps = -(-history // plan.consultants) + -(-due // plan.consultants)
    return SlotTableSpec(
        total=slots,
        due=due,
        history=history,
        consultants=plan.consultants,
        tenants=plan.tenants,
        stride=coprime_stride(slots),
        as_of=as_of,
        step=past / past_steps,
    )


async def measure_partitioned(ctx: BenchContext) -> Partitioned:
    plan = ctx.plan.partitioned
    # Section e's rounds, at this section's size of them.
    timed = replace(ctx, plan=replace(ctx.plan, growth=plan.growth()))
    points = []
    try:
        for slots in plan.sizes:
            for layout in Layout:
                points.append(await _point(timed, layout, slots))
    except StoreError as exc:
        if "pg_partman" not in str(exc):
            raise
        ctx.progress(f"h. not measured: {exc}")
        return Partitioned(plan.months, tuple(points), not_measured=str(exc))
    return Partitioned(plan.months, tuple(points))


async def _point(ctx: BenchContext, layout: Layout, slots: int) -> PartitionPoint:
    plan, store = ctx.plan.partitioned, ctx.store
    spec = calendar_spec(plan, slots, ctx.plan.batch_size, ctx.as_of)
    ctx.progress(f"h. {slots:,} slots over {plan.months} months, {layout.value}: loading")
    started = time.perf_counter()
    await store.recreate_schema()
    if layout is Layout.MONTHLY:
        await store.create_monthly_calendar(first_month(ctx.as_of, plan.months), plan.premake)
    else:
        await store.create_plain_calendar()
    await store.load_slots(spec)
    await store.vacuum_analyze()
    # As a calendar's table is adopted: the worker's index built on each partition.
    await asyncio.to_thread(upgrade, ctx.url, sandbox=True)
    await store.vacuum_analyze()
    load_seconds = time.perf_counter() - started
    await store.autovacuum(enabled=False)
    await store.checkpoint()
    due = await store.count_due(ctx.as_of)
    if due != spec.due:
        raise BenchError(f"h. the table holds {due} due rows, not {spec.due}")
    heap, indexes = await store.relation_bytes()
    occasion = f"h. {slots:,} slots, {layout.value}"
    await ctx.explain(occasion, "expire_batch")
    await store.vacuum_analyze()  # the explained, rolled-back update left dead tuples
    ctx.progress(f"{occasion}: one batch")
    clean = await timed_phase(ctx, DueRows(left=due, restored=due), vacuum=True)
    ctx.progress(f"{occasion}: drains of {plan.drain_rows:,} rows")
    await restore_backlog(store, ctx.as_of)
    worker = await _drain(ctx, plan.drain_rows, worker=True)
    await restore_backlog(store, ctx.as_of)
    bare = await _drain(ctx, plan.drain_rows, worker=False)
    # Put back without a checkpoint: the pages the drain touches carry their images.
    await store.reset_backlog(ctx.as_of)
    again = await _drain(ctx, plan.drain_rows, worker=True)
    return PartitionPoint(
        layout=layout.value,
        slots=slots,
        partitions=await store.partitions(),
        due=due,
        load_seconds=load_seconds,
        table_mib=heap / _MIB,
        indexes_mib=indexes / _MIB,
        clean=clean,
        worker_drain=worker,
        bare_drain=bare,
        worker_drain_again=again,
    )


async def _drain(ctx: BenchContext, rows: int, *, worker: bool) -> DrainRun:
    """`rows` rows drained in full batches, by the worker in one cycle or by the bare loop;
    the WAL the server wrote meanwhile."""
    size = ctx.plan.batch_size
    batches = rows // size
    position = await ctx.store.wal_position()
    started = time.perf_counter()
    if worker:
        recorder = BatchRecorder()
        await worker_cycle(ctx.worker_options(batches), ctx.as_of, recorder)
        ms = recorder.batch_ms()
        expired = sum(b.expired_count for b in recorder.batches)
    else:
        timed = [await bare_batch(ctx.store, ctx.as_of, size) for _ in range(batches)]
        ms, expired = [b.ms for b in timed], sum(b.rows for b in timed)
    seconds = time.perf_counter() - started
    wal = await ctx.store.wal_bytes_since(position)
    if expired != batches * size:
        raise BenchError(f"h. a drain expired {expired} rows, not {batches * size}")
    return replace(drain_run(expired, seconds, ms, len(ms)), wal_mb=wal / 1e6)
