"""Section d: booking latency (p50, p99) with and without a worker draining beside it.

pgbench books random future slots at a fixed rate, twice for the same length of
time: once alone, once while a real `slot-expiration once` process drains the
backlog. The first run leaves out its warm-up; the second keeps only the
bookings that ended while the worker's cycle ran (from its cycle.started to its
cycle.completed log lines).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from slot_expiration.bench.context import BenchContext, BenchError
from slot_expiration.bench.dataset import restore_backlog
from slot_expiration.bench.pgbench import (
    LoggedTransaction,
    PgbenchSettings,
    between,
    booking_script,
    run_pgbench,
)
from slot_expiration.bench.processes import (
    drain_once_args,
    event_time,
    once_summary,
    worker_process,
)
from slot_expiration.bench.stats import Distribution, rate, ratio
from slot_expiration.bench.timing import DRAIN_BUDGET_SECONDS
from slot_expiration.store.bench_store import booking_statements

LOCK_TIMEOUT_SECONDS = 2.0  # the worker's default


@dataclass(frozen=True, slots=True)
class BookingLatency:
    bookings: int  # transactions that succeeded in the window
    failed: int  # transactions pgbench logged as failed or skipped in the window
    latency_ms: Distribution
    bookings_per_second: float
    window_seconds: float


@dataclass(frozen=True, slots=True)
class BookingInterference:
    rate_per_second: int
    clients: int
    without_worker: BookingLatency
    with_worker: BookingLatency
    p50_ratio: float | None  # with / without
    p99_ratio: float | None
    worker_rows: int  # what the worker drained meanwhile
    worker_rows_per_second: float


async def measure_bookings(ctx: BenchContext) -> BookingInterference:
    load = ctx.plan.booking
    settings = PgbenchSettings(load.seconds, load.rate_per_second, load.clients)
    backlog = await restore_backlog(ctx.store, ctx.as_of)
    ctx.progress(f"d. bookings alone ({load.rate_per_second}/s for {load.seconds:g} s)")
    alone = await _alone(ctx, settings)
    ctx.progress(f"d. bookings beside a worker draining {backlog:,} rows")
    beside, rows, drain_seconds = await _beside_worker(ctx, settings)
    if rows != backlog:
        raise BenchError(f"d. the worker expired {rows} rows, not the backlog of {backlog}")
    return BookingInterference(
        rate_per_second=load.rate_per_second,
        clients=load.clients,
        without_worker=alone,
        with_worker=beside,
        p50_ratio=ratio(beside.latency_ms.median, alone.latency_ms.median),
        p99_ratio=ratio(beside.latency_ms.p99, alone.latency_ms.p99),
        worker_rows=rows,
        worker_rows_per_second=rate(rows, drain_seconds),
    )


async def _script(ctx: BenchContext) -> str:
    count = await ctx.store.fill_booking_candidates(ctx.as_of, ctx.plan.booking.candidates)
    pick, book = booking_statements()
    return booking_script(pick, book, count)


async def _alone(ctx: BenchContext, settings: PgbenchSettings) -> BookingLatency:
    script = await _script(ctx)
    started = time.time()
    logged = await run_pgbench(ctx.url, script, settings)
    return latency_in(logged, started + ctx.plan.booking.warmup_seconds, float("inf"))


async def _beside_worker(
    ctx: BenchContext, settings: PgbenchSettings
) -> tuple[BookingLatency, int, float]:
    script = await _script(ctx)
    bookings = asyncio.create_task(run_pgbench(ctx.url, script, settings))
    try:
        await asyncio.sleep(ctx.plan.booking.warmup_seconds)  # bookings reach their pace
        args = drain_once_args(
            ctx.url, ctx.as_of, ctx.plan.batch_size, DRAIN_BUDGET_SECONDS, LOCK_TIMEOUT_SECONDS
        )
        async with worker_process(*args) as worker:
            await worker.wait()
        logged = await bookings
    finally:
        bookings.cancel()
        await asyncio.gather(bookings, return_exceptions=True)
    start = event_time(worker.events("cycle.started")[0]).timestamp()
    end = event_time(worker.events("cycle.completed")[-1]).timestamp()
    rows = int(once_summary(worker)["expired_count"])
    return latency_in(logged, start, end), rows, end - start


def latency_in(logged: Sequence[LoggedTransaction], start: float, end: float) -> BookingLatency:
    """The bookings that ended in [start, end]; the window ends at the last of them at most."""
    window = between(logged, start, end)
    done = [t.latency_ms for t in window if t.ok and t.latency_ms is not None]
    if not done:
        raise BenchError("no booking ended while it was measured")
    first = max(start, min(t.ended_at for t in logged))
    last = min(end, max(t.ended_at for t in window))
    seconds = max(last - first, 0.0)
    return BookingLatency(
        bookings=len(done),
        failed=len(window) - len(done),
        latency_ms=Distribution.of(done),
        bookings_per_second=rate(len(done), seconds),
        window_seconds=seconds,
    )
