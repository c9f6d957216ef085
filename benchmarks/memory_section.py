"""Section f: the resident memory of a `slot-expiration run` process, idle and draining.

The worker starts with nothing due and is watched idle; then the backlog is
put back, the worker drains it in one cycle (drain mode) while its memory is
sampled, and it is watched idle again before it is stopped with SIGTERM.
"""

from __future__ import annotations

import asyncio
import statistics
from dataclasses import dataclass

from benchmarks.context import BenchContext, BenchError
from benchmarks.memory import Resident, resident
from benchmarks.processes import WorkerProcess, worker_process

SAMPLE_SECONDS = 0.02
INTERVAL_SECONDS = 1.0  # the worker's tick while it is watched


@dataclass(frozen=True, slots=True)
class MemoryProfile:
    idle_mb: float  # median resident memory, idle after start
    draining_peak_mb: float  # the most resident while it drained
    idle_after_drain_mb: float
    lifetime_peak_mb: float  # VmHWM at the end
    drained_rows: int


async def measure_memory(ctx: BenchContext) -> MemoryProfile:
    await ctx.store.reset_backlog(ctx.as_of)
    await ctx.store.expire_oldest(ctx.as_of, ctx.plan.table.slots)  # nothing due
    ctx.progress("f. a `run` worker, idle")
    async with worker_process(*_run_args(ctx)) as worker:
        await worker.until(lambda: _completed(worker, any_rows=False), "its first cycle")
        idle = await _watch(worker, ctx.plan.idle_seconds)
        ctx.progress("f. the same worker draining the backlog")
        # Put back as one commit, not vacuumed: the next tick drains it at once.
        backlog = await ctx.store.reset_backlog(ctx.as_of)
        draining = await _watch_until_drained(worker)
        after = await _watch(worker, ctx.plan.idle_seconds)
        lifetime = resident(worker.pid).peak_mb
        worker.terminate()
        await worker.wait()
    drained = sum(int(e["expired_count"]) for e in worker.events("cycle.completed"))
    if drained != backlog:
        raise BenchError(f"f. the worker expired {drained} rows, not the backlog of {backlog}")
    return MemoryProfile(
        idle_mb=statistics.median(s.rss_mb for s in idle),
        draining_peak_mb=max(s.rss_mb for s in draining),
        idle_after_drain_mb=statistics.median(s.rss_mb for s in after),
        lifetime_peak_mb=lifetime,
        drained_rows=drained,
    )


def _run_args(ctx: BenchContext) -> tuple[str, ...]:
    """`run` as deployed, draining; its endpoint on a port of its own choosing."""
    return (
        "run",
        "--max-batches-per-cycle",
        "0",
        "--interval-seconds",
        f"{INTERVAL_SECONDS:g}",
        "--metrics-addr",
        "127.0.0.1:0",
        *ctx.worker_flags(),
    )


def _completed(worker: WorkerProcess, *, any_rows: bool) -> bool:
    cycles = worker.events("cycle.completed")
    return any(int(e["expired_count"]) > 0 for e in cycles) if any_rows else bool(cycles)


async def _watch(worker: WorkerProcess, seconds: float) -> list[Resident]:
    samples = [resident(worker.pid)]
    for _ in range(max(1, round(seconds / SAMPLE_SECONDS))):
        await asyncio.sleep(SAMPLE_SECONDS)
        samples.append(resident(worker.pid))
    return samples


async def _watch_until_drained(worker: WorkerProcess) -> list[Resident]:
    samples = [resident(worker.pid)]
    while not _completed(worker, any_rows=True):
        if worker.process.returncode is not None:
            raise BenchError("f. the worker exited while it drained")
        await asyncio.sleep(SAMPLE_SECONDS)
        samples.append(resident(worker.pid))
    return samples
