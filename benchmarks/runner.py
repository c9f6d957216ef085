"""One benchmark run: the database, the table, each chosen section in turn, the report."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from benchmarks.batch_section import measure_batches
from benchmarks.booking_section import measure_bookings
from benchmarks.context import BenchContext, Progress
from benchmarks.database import bench_database, reported_settings
from benchmarks.dataset import LoadedTable, load_table, reference_time
from benchmarks.drain_rate_section import measure_drain_rates
from benchmarks.drain_section import measure_drains
from benchmarks.growth_section import measure_growth
from benchmarks.machine import cpu_busy
from benchmarks.memory_section import measure_memory
from benchmarks.options import BenchOptions
from benchmarks.parallel_section import measure_parallel
from benchmarks.partition_section import measure_partitioned
from benchmarks.plan import Section, plan_for
from benchmarks.report import BenchReport, BenchResults, Conditions, RunFacts
from benchmarks.store import BenchStore
from benchmarks.throttle_section import measure_throttle

BUSY_SAMPLE_SECONDS = 3.0
_RESULT_FIELD = {
    Section.BATCH: "batch",
    Section.DRAIN: "drain",
    Section.PARALLEL: "parallel",
    Section.BOOKING: "booking",
    Section.DRAIN_RATE: "drain_rate",
    Section.MEMORY: "memory",
    Section.GROWTH: "growth",
    Section.PARTITIONED: "partitioned",
    Section.THROTTLE: "throttle",
}
_MEASURE: dict[Section, Callable[[BenchContext], Awaitable[Any]]] = {
    Section.BATCH: measure_batches,
    Section.DRAIN: measure_drains,
    Section.PARALLEL: measure_parallel,
    Section.BOOKING: measure_bookings,
    Section.DRAIN_RATE: measure_drain_rates,
    Section.MEMORY: measure_memory,
    Section.GROWTH: measure_growth,
    Section.PARTITIONED: measure_partitioned,
    Section.THROTTLE: measure_throttle,
}


async def run_bench(options: BenchOptions, command: str, progress: Progress) -> BenchReport:
    load_before = os.getloadavg()
    busy_before = await cpu_busy(BUSY_SAMPLE_SECONDS)
    started_at, started = datetime.now(UTC), time.monotonic()
    async with bench_database(options.database_url, options.server_settings) as database:
        progress(f"on {database.where}: schema slot_expiration_bench created")
        async with BenchStore.connect(database.url) as store:
            ctx = BenchContext(
                url=database.url,
                as_of=reference_time(started_at),
                plan=plan_for(options.mode),
                store=store,
                progress=progress,
                worker=options.worker,
                drain_batch_size_flag=True,  # the worker measured is this release's
            )
            table = await _prepare(ctx, options.sections)
            try:
                results, conditions = await _measure(ctx, options.sections)
            finally:
                await store.autovacuum(enabled=True)
            facts = RunFacts(
                mode=options.mode.value,
                command=command,
                database=database.where,
                embedded=database.embedded,
                started_at=started_at.isoformat(timespec="seconds"),
                seconds=0.0,
                cpus=os.cpu_count() or 0,
                as_of=ctx.as_of.isoformat(),
                server_version=await store.server_version(),
                server_settings=await store.server_settings(
                    reported_settings(options.server_settings)
                ),
                table=table,
                worker=options.worker,
                checkpoint_before_sections=store.can_checkpoint,
                load_before_run=load_before,
                cpu_busy_before_run=busy_before,
                conditions=conditions,
                server_overrides=options.server_settings,
            )
    facts = replace(facts, seconds=time.monotonic() - started)
    return BenchReport(facts, replace(results, plans=ctx.plans))


async def _prepare(ctx: BenchContext, sections: tuple[Section, ...]) -> LoadedTable | None:
    """Load the shared table (unless only the growth section runs) and read the plans of
    the worker's statement and the bare one on it, before anything is expired."""
    if set(sections) <= {Section.GROWTH, Section.PARTITIONED}:
        return None
    shape = ctx.plan.table
    ctx.progress(f"loading {shape.slots:,} slots ({shape.due:,} due)")
    table = await load_table(ctx.store, shape, ctx.as_of)
    # The sections vacuum the table themselves before each part they measure; an
    # autovacuum starting by itself in the middle of one would weigh on whatever ran
    # then (what autovacuum does to the batches is section e's subject).
    await ctx.store.autovacuum(enabled=False)
    ctx.progress(f"loaded in {table.load_seconds:.1f} s: {table.by_status}")
    occasion = f"{shape.slots:,} slots, {shape.due:,} due, as loaded"
    for statement in (
        "expire_batch",
        "bench_bare_batch",
        "count_backlog_capped",
        "end_departed_entries",
    ):
        await ctx.explain(occasion, statement)
    await ctx.store.vacuum_analyze()  # the explained, rolled-back updates left dead tuples
    if {Section.BOOKING, Section.DRAIN_RATE, Section.THROTTLE} & set(sections):
        await ctx.store.create_booking_candidates()
    return table


async def _measure(
    ctx: BenchContext, sections: tuple[Section, ...]
) -> tuple[BenchResults, dict[str, Conditions]]:
    results, conditions = BenchResults(), {}
    for section in sections:
        load, started = os.getloadavg()[0], time.monotonic()
        before = await ctx.store.activity_counters()
        ours = ctx.store.checkpoints_run
        measured = await _MEASURE[section](ctx)
        if isinstance(measured, list):
            measured = tuple(measured)
        results = replace(results, **{_RESULT_FIELD[section]: measured})
        after = await ctx.store.activity_counters()
        conditions[section.value] = Conditions(
            load_before=load,
            load_after=os.getloadavg()[0],
            checkpoints=after.checkpoints - before.checkpoints - (ctx.store.checkpoints_run - ours),
            autovacuum_runs=after.autovacuum_runs_since(before),
            seconds=time.monotonic() - started,
        )
        ctx.progress(f"{section.value}. done (load average {os.getloadavg()[0]:.2f})")
    return results, conditions
