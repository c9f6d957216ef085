"""Section c: the same drain by 1, 2 and 4 worker processes side by side.

Real `slot-expiration once --max-batches-per-cycle 0` processes. Python takes
a moment to start, so a gate makes them begin together: the benchmark holds a
lock on the quarantine table that every cycle's first statement needs, and
lets go once all of them wait on it. The time runs from that moment to the
last exit. Afterwards the table must show every due row expired exactly once,
and the processes' expired counts must add up to it.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass

from benchmarks.context import BenchContext, BenchError
from benchmarks.dataset import restore_backlog
from benchmarks.processes import (
    WorkerProcess,
    once_summary,
    worker_process,
)
from benchmarks.stats import rate
from benchmarks.store import BenchStore

GATE_WAIT_SECONDS = 120.0
_POLL_SECONDS = 0.02


@dataclass(frozen=True, slots=True)
class ParallelDrain:
    processes: int
    backlog: int
    rows_expired: int  # in the table: rows that became Expired in this drain
    expired_counts: tuple[int, ...]  # as each process reported it
    skipped_locked: int  # rows passed over because another process held them
    batches: int
    seconds: float
    rows_per_second: float
    not_once: int  # rows whose version did not rise by exactly one

    @property
    def exactly_once(self) -> bool:
        return sum(self.expired_counts) == self.rows_expired == self.backlog and not self.not_once


async def measure_parallel(ctx: BenchContext) -> list[ParallelDrain]:
    return [await _drain_with(ctx, n) for n in ctx.plan.processes]


async def _drain_with(ctx: BenchContext, processes: int) -> ParallelDrain:
    backlog = await restore_backlog(ctx.store, ctx.as_of)
    ctx.progress(f"c. {processes} worker process(es) draining {backlog:,} rows")
    args = ctx.drain_once_args(GATE_WAIT_SECONDS)
    async with AsyncExitStack() as stack:
        # The gate is held on a session of its own: inside its transaction,
        # pg_stat_activity would show one frozen snapshot.
        gate = await stack.enter_async_context(BenchStore.connect(ctx.url))
        async with gate.workers_gated():
            workers = [
                await stack.enter_async_context(worker_process(*args)) for _ in range(processes)
            ]
            await _all_waiting(ctx, workers)
            started = time.perf_counter()
        for worker in workers:
            await worker.wait()
        seconds = time.perf_counter() - started
    summaries = [once_summary(worker) for worker in workers]
    expired, not_once = await ctx.store.drained(ctx.as_of)
    drain = ParallelDrain(
        processes=processes,
        backlog=backlog,
        rows_expired=expired,
        expired_counts=tuple(int(s["expired_count"]) for s in summaries),
        skipped_locked=sum(int(s["skipped_locked_count"]) for s in summaries),
        batches=sum(int(s["batches"]) for s in summaries),
        seconds=seconds,
        rows_per_second=rate(expired, seconds),
        not_once=not_once,
    )
    if not drain.exactly_once:
        raise BenchError(
            f"{processes} processes: expired counts {drain.expired_counts} "
            f"vs {expired} rows expired of {backlog}, {not_once} not exactly once"
        )
    return drain


async def _all_waiting(ctx: BenchContext, workers: list[WorkerProcess]) -> None:
    async def waiting() -> bool:
        for worker in workers:
            if worker.process.returncode is not None:
                await worker.wait()  # raises with its error line
                raise BenchError("a worker exited before the gate opened")
        return await ctx.store.workers_waiting() == len(workers)

    deadline = time.monotonic() + GATE_WAIT_SECONDS
    while not await waiting():
        if time.monotonic() > deadline:
            raise BenchError("the worker processes did not all reach the gate")
        await asyncio.sleep(_POLL_SECONDS)
