"""Section d: booking latency (p50, p99) with and without a worker draining beside it.

pgbench books random future slots at a fixed rate with the slot context's own
book-slot statement (in a transaction, as the book operation sends it), for the
same length of time: once alone, once while a real `slot-expiration once` process drains the
backlog, and that pair again (a disturbance from elsewhere then weighs on both
kinds rather than on one). A run alone leaves out its warm-up; a run beside
the worker keeps only the bookings that ended while the worker's cycle ran
(from its cycle.started to its cycle.completed log lines). Each kind's
bookings are pooled over the pairs.
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
    event_time,
    once_summary,
    worker_process,
)
from slot_expiration.bench.stats import Distribution, rate, ratio
from slot_expiration.bench.store import booking_statements
from slot_expiration.domain import BOOK, sources_of
from slot_expiration.slots.options import SlotOptions

LOCK_TIMEOUT_SECONDS = 2.0  # the worker's default


@dataclass(frozen=True, slots=True)
class BookingLatency:
    bookings: int  # transactions that succeeded in the windows
    failed: int  # transactions pgbench logged as failed or skipped in the windows
    latency_ms: Distribution
    bookings_per_second: float
    window_seconds: float


@dataclass(frozen=True, slots=True)
class BookingInterference:
    rate_per_second: int
    clients: int
    pairs: int  # runs alone and beside a worker, taken in turn; their bookings pooled
    without_worker: BookingLatency
    with_worker: BookingLatency
    p50_ratio: float | None  # with / without
    p99_ratio: float | None
    pair_p99_ratios: tuple[float | None, ...]  # each pair's own, to see the spread
    worker_rows: int  # what the worker drained meanwhile, each time
    worker_rows_per_second: float
    slots_booked: int  # candidate slots the bookings moved to Booked, over all runs


@dataclass(frozen=True, slots=True)
class Window:
    """The bookings pgbench logged in a stretch of time, and how long it was."""

    transactions: tuple[LoggedTransaction, ...]
    seconds: float


async def measure_bookings(ctx: BenchContext) -> BookingInterference:
    load = ctx.plan.booking
    settings = PgbenchSettings(
        load.seconds, load.rate_per_second, load.clients, booking_variables()
    )
    alone: list[Window] = []
    beside: list[Window] = []
    drains: list[tuple[int, float]] = []
    booked = 0
    for number in range(1, load.pairs + 1):
        backlog = await restore_backlog(ctx.store, ctx.as_of)
        ctx.progress(
            f"d. {number}/{load.pairs}: bookings alone "
            f"({load.rate_per_second}/s for {load.seconds:g} s)"
        )
        alone.append(await _alone(ctx, settings))
        booked += await ctx.store.booked_candidates()
        ctx.progress(
            f"d. {number}/{load.pairs}: bookings beside a worker draining {backlog:,} rows"
        )
        window, rows, seconds = await _beside_worker(ctx, settings)
        if rows != backlog:
            raise BenchError(f"d. the worker expired {rows} rows, not the backlog of {backlog}")
        beside.append(window)
        drains.append((rows, seconds))
        booked += await ctx.store.booked_candidates()
    without, with_worker = latency_of(alone), latency_of(beside)
    return BookingInterference(
        rate_per_second=load.rate_per_second,
        clients=load.clients,
        pairs=load.pairs,
        without_worker=without,
        with_worker=with_worker,
        p50_ratio=ratio(with_worker.latency_ms.median, without.latency_ms.median),
        p99_ratio=ratio(with_worker.latency_ms.p99, without.latency_ms.p99),
        pair_p99_ratios=tuple(
            ratio(latency_of([b]).latency_ms.p99, latency_of([a]).latency_ms.p99)
            for a, b in zip(alone, beside, strict=True)
        ),
        worker_rows=drains[-1][0],
        worker_rows_per_second=rate(sum(r for r, _ in drains), sum(s for _, s in drains)),
        slots_booked=booked,
    )


async def _script(ctx: BenchContext) -> str:
    count = await ctx.store.fill_booking_candidates(ctx.as_of, ctx.plan.booking.candidates)
    return booking_script(booking_statements(), count)


def booking_variables() -> dict[str, str]:
    """What the book operation passes to book_slot besides the slot and the clock: from
    the state machine and the slot context's default lead time."""
    sources = ",".join(sorted(status.value for status in sources_of(BOOK.target)))
    lead = SlotOptions.model_fields["min_lead_time_minutes"].default
    return {"target": BOOK.target.value, "sources": f"{{{sources}}}", "lead_minutes": str(lead)}


async def _alone(ctx: BenchContext, settings: PgbenchSettings) -> Window:
    script = await _script(ctx)
    started = time.time()
    logged = await run_pgbench(ctx.url, script, settings)
    return window_of(logged, started + ctx.plan.booking.warmup_seconds, float("inf"))


async def _beside_worker(ctx: BenchContext, settings: PgbenchSettings) -> tuple[Window, int, float]:
    script = await _script(ctx)
    bookings = asyncio.create_task(run_pgbench(ctx.url, script, settings))
    try:
        await asyncio.sleep(ctx.plan.booking.warmup_seconds)  # bookings reach their pace
        args = ctx.drain_once_args(LOCK_TIMEOUT_SECONDS)
        async with worker_process(*args) as worker:
            await worker.wait()
        logged = await bookings
    finally:
        bookings.cancel()
        await asyncio.gather(bookings, return_exceptions=True)
    start = event_time(worker.events("cycle.started")[0]).timestamp()
    end = event_time(worker.events("cycle.completed")[-1]).timestamp()
    rows = int(once_summary(worker)["expired_count"])
    return window_of(logged, start, end), rows, end - start


def window_of(logged: Sequence[LoggedTransaction], start: float, end: float) -> Window:
    """The bookings that ended in [start, end]; the window ends at the last of them at most."""
    kept = between(logged, start, end)
    if not kept:
        raise BenchError("no booking ended while it was measured")
    first = max(start, min(t.ended_at for t in logged))
    last = min(end, max(t.ended_at for t in kept))
    return Window(tuple(kept), max(last - first, 0.0))


def latency_of(windows: Sequence[Window]) -> BookingLatency:
    """The bookings of several windows, pooled."""
    logged = [t for window in windows for t in window.transactions]
    done = [t.latency_ms for t in logged if t.ok and t.latency_ms is not None]
    if not done:
        raise BenchError("no booking succeeded while it was measured")
    seconds = sum(window.seconds for window in windows)
    return BookingLatency(
        bookings=len(done),
        failed=len(logged) - len(done),
        latency_ms=Distribution.of(done),
        bookings_per_second=rate(len(done), seconds),
        window_seconds=seconds,
    )
