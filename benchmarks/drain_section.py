"""Section b: draining the backlog, the worker in drain mode vs a plain loop of the bare
statement, each from the same restored table; rows per second and the ratio of times."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, replace

from benchmarks.context import BenchContext, BenchError
from benchmarks.dataset import restore_backlog
from benchmarks.stats import rate, ratio
from benchmarks.timing import BatchRecorder, bare_batch, worker_cycle
from slot_expiration.cycle import StopReason

# Batches at the start and at the end of a drain, to show how a batch's cost moves
# as the dead tuples of the rows already expired pile up in front of the rest.
EDGE_BATCHES = 10


@dataclass(frozen=True, slots=True)
class DrainRun:
    rows: int
    seconds: float
    rows_per_second: float
    batches: int
    first_batches_ms: float  # median of the first EDGE_BATCHES batches
    last_batches_ms: float  # median of the last EDGE_BATCHES full batches
    wal_mb: float = 0.0  # WAL the server wrote meanwhile (10^6 bytes)
    # This process's CPU (time.process_time) per batch: the client's side of a batch,
    # the worker's Python against the bare loop's, both driven from here.
    cpu_ms_per_batch: float = 0.0


@dataclass(frozen=True, slots=True)
class DrainComparison:
    backlog: int
    worker: DrainRun
    bare: DrainRun
    time_ratio: float | None  # worker seconds / bare seconds


async def measure_drains(ctx: BenchContext) -> DrainComparison:
    # A freshly loaded table's first drain pays its first touch of every page (13 ms a
    # batch against 8.6 once drained before, measured): whichever drain came first would
    # carry it. An unmeasured drain takes it, so both measured ones start alike whether
    # or not a section ran before.
    backlog = await restore_backlog(ctx.store, ctx.as_of)
    ctx.progress(f"b. warming the table: one unmeasured drain of {backlog:,} rows")
    await _bare_drain(ctx)
    await restore_backlog(ctx.store, ctx.as_of)
    ctx.progress(f"b. worker draining {backlog:,} rows (drain mode, one cycle)")
    worker = await _with_wal(ctx, _worker_drain(ctx))
    await _check_drained(ctx, backlog)
    await restore_backlog(ctx.store, ctx.as_of)
    ctx.progress(f"b. bare statement draining {backlog:,} rows")
    bare = await _with_wal(ctx, _bare_drain(ctx))
    await _check_drained(ctx, backlog)
    return DrainComparison(backlog, worker, bare, ratio(worker.seconds, bare.seconds))


async def _with_wal(ctx: BenchContext, drain: Awaitable[DrainRun]) -> DrainRun:
    position = await ctx.store.wal_position()
    run = await drain
    return replace(run, wal_mb=await ctx.store.wal_bytes_since(position) / 1e6)


async def _worker_drain(ctx: BenchContext) -> DrainRun:
    options = ctx.worker_options(0)
    recorder = BatchRecorder()
    started, cpu = time.perf_counter(), time.process_time()
    while True:  # one cycle drains it all, unless its budget runs out first
        result = await worker_cycle(options, ctx.as_of, recorder)
        if result.stop_reason is StopReason.DRAINED:
            break
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    rows = sum(c.expired_count for c in recorder.cycles)
    run = drain_run(rows, seconds, recorder.batch_ms(), _full(recorder, ctx.plan.batch_size))
    return replace(run, cpu_ms_per_batch=cpu * 1000 / run.batches)


async def _bare_drain(ctx: BenchContext) -> DrainRun:
    size, ms, rows = ctx.plan.batch_size, [], 0
    started, cpu = time.perf_counter(), time.process_time()
    while True:
        batch = await bare_batch(ctx.store, ctx.as_of, size)
        ms.append(batch.ms)
        rows += batch.rows
        if batch.rows < size:
            break
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    run = drain_run(rows, seconds, ms, len(ms) - 1)
    return replace(run, cpu_ms_per_batch=cpu * 1000 / run.batches)


def _full(recorder: BatchRecorder, size: int) -> int:
    return sum(1 for batch in recorder.batches if batch.expired_count == size)


def drain_run(rows: int, seconds: float, batch_ms: Sequence[float], full_batches: int) -> DrainRun:
    """A drain's figures; the edges leave out the short last batch."""
    full = list(batch_ms[: max(full_batches, 1)])
    return DrainRun(
        rows=rows,
        seconds=seconds,
        rows_per_second=rate(rows, seconds),
        batches=len(batch_ms),
        first_batches_ms=statistics.median(full[:EDGE_BATCHES]),
        last_batches_ms=statistics.median(full[-EDGE_BATCHES:]),
    )


async def _check_drained(ctx: BenchContext, backlog: int) -> None:
    expired, wrong = await ctx.store.drained(ctx.as_of)
    if expired != backlog or wrong:
        raise BenchError(
            f"the drain expired {expired} of {backlog} rows, {wrong} of them not exactly once"
        )
