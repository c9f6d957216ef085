"""Section b: draining the backlog, the worker in drain mode vs a plain loop of the bare
statement, each from the same restored table, in rounds; rows per second and the ratio of
times, round by round.

A round drains the backlog four times, in an order turned by one each round: the worker as
it ships (its transactions commit without waiting for the WAL flush), the worker with
`--synchronous-commit on`, the bare loop on a session with the server's own synchronous
commit (the floor a plain SQL loop reaches as most would write it), and the bare loop with
`synchronous_commit = off` (the floor with the worker's own setting). The headline is each
round's worker time / the bare loop's at the server's setting.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from benchmarks.context import BenchContext, BenchError
from benchmarks.dataset import restore_backlog
from benchmarks.stats import Spread, rate, ratio
from benchmarks.store import BenchStore
from benchmarks.timing import BatchRecorder, bare_batch, worker_cycle
from slot_expiration.expiry import StopReason
from slot_expiration.options import SynchronousCommit

# Batches at the start and at the end of a drain, to show how a batch's cost moves
# as the dead tuples of the rows already expired pile up in front of the rest.
EDGE_BATCHES = 10


class DrainKind(StrEnum):
    WORKER = "worker"
    WORKER_SYNCHRONOUS = "worker, synchronous commit on"
    BARE = "bare loop"
    BARE_ASYNCHRONOUS = "bare loop, synchronous commit off"


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
class DrainSeries:
    """One kind of drain over the rounds, each round's run in the order the rounds ran."""

    kind: str
    runs: tuple[DrainRun, ...]

    @property
    def seconds(self) -> Spread | None:
        return Spread.of([run.seconds for run in self.runs])

    @property
    def rows_per_second(self) -> Spread | None:
        return Spread.of([run.rows_per_second for run in self.runs])

    @property
    def median_run(self) -> DrainRun:
        """The round whose time is the median (the lower of two middles)."""
        ordered = sorted(self.runs, key=lambda run: run.seconds)
        return ordered[(len(ordered) - 1) // 2]

    def median_of(self, figure: Callable[[DrainRun], float]) -> float:
        return float(statistics.median(figure(run) for run in self.runs))


@dataclass(frozen=True, slots=True)
class DrainComparison:
    backlog: int
    rounds: int
    worker: DrainSeries
    worker_synchronous: DrainSeries
    bare: DrainSeries
    bare_asynchronous: DrainSeries
    time_ratio: Spread | None  # each round: worker seconds / bare loop seconds
    synchronous_ratio: Spread | None  # each round: worker, synchronous commit on / bare loop
    asynchronous_floor_ratio: Spread | None  # each round: worker / bare loop, commit off


async def measure_drains(ctx: BenchContext) -> DrainComparison:
    # A freshly loaded table's first drain pays its first touch of every page (13 ms a
    # batch against 8.6 once drained before, measured): whichever drain came first would
    # carry it. An unmeasured drain takes it, so every measured one starts alike whether
    # or not a section ran before.
    backlog = await restore_backlog(ctx.store, ctx.as_of)
    ctx.progress(f"b. warming the table: one unmeasured drain of {backlog:,} rows")
    await _bare_drain(ctx, ctx.store)
    drains: dict[DrainKind, Callable[[], Awaitable[DrainRun]]] = {
        DrainKind.WORKER: lambda: _worker_drain(ctx),
        DrainKind.WORKER_SYNCHRONOUS: lambda: _worker_drain(ctx, SynchronousCommit.ON),
        DrainKind.BARE: lambda: _bare_drain(ctx, ctx.store),
        DrainKind.BARE_ASYNCHRONOUS: lambda: _asynchronous_bare_drain(ctx),
    }
    kinds, rounds = list(drains), ctx.plan.drain_rounds
    runs: dict[DrainKind, list[DrainRun]] = {kind: [] for kind in kinds}
    for number in range(rounds):
        turn = number % len(kinds)
        for kind in [*kinds[turn:], *kinds[:turn]]:
            await restore_backlog(ctx.store, ctx.as_of)
            ctx.progress(f"b. round {number + 1}/{rounds}: {kind.value} draining {backlog:,} rows")
            runs[kind].append(await _with_wal(ctx, drains[kind]()))
            await _check_drained(ctx, backlog)
    series = {kind: DrainSeries(kind.value, tuple(runs[kind])) for kind in kinds}
    worker, bare = series[DrainKind.WORKER], series[DrainKind.BARE]
    return DrainComparison(
        backlog=backlog,
        rounds=rounds,
        worker=worker,
        worker_synchronous=series[DrainKind.WORKER_SYNCHRONOUS],
        bare=bare,
        bare_asynchronous=series[DrainKind.BARE_ASYNCHRONOUS],
        time_ratio=time_ratio(worker, bare),
        synchronous_ratio=time_ratio(series[DrainKind.WORKER_SYNCHRONOUS], bare),
        asynchronous_floor_ratio=time_ratio(worker, series[DrainKind.BARE_ASYNCHRONOUS]),
    )


def time_ratio(drains: DrainSeries, references: DrainSeries) -> Spread | None:
    """Each round's drain time / the reference's in the same round."""
    return Spread.of(
        [
            ratio(run.seconds, reference.seconds)
            for run, reference in zip(drains.runs, references.runs, strict=True)
        ]
    )


async def _with_wal(ctx: BenchContext, drain: Awaitable[DrainRun]) -> DrainRun:
    position = await ctx.store.wal_position()
    run = await drain
    return replace(run, wal_mb=await ctx.store.wal_bytes_since(position) / 1e6)


async def _worker_drain(
    ctx: BenchContext, synchronous_commit: SynchronousCommit | None = None
) -> DrainRun:
    options = ctx.worker_options(0, synchronous_commit)
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


async def _asynchronous_bare_drain(ctx: BenchContext) -> DrainRun:
    """The bare loop on a session of its own whose commits do not wait for the flush."""
    async with BenchStore.connect(ctx.url, synchronous_commit="off") as store:
        return await _bare_drain(ctx, store)


async def _bare_drain(ctx: BenchContext, store: BenchStore) -> DrainRun:
    size, ms, rows = ctx.plan.batch_size, [], 0
    started, cpu = time.perf_counter(), time.process_time()
    while True:
        batch = await bare_batch(store, ctx.as_of, size)
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
