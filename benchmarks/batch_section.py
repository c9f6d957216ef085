"""Section a: one batch of 500, the worker's inside a drain cycle vs the bare statement.

Both run alternately on the same table in the same run: a round is one worker
cycle of N batches and N bare batches, the order swapped every round so that
the table's slow drift (dead tuples of the rows expired so far) weighs on both
alike. The worker's default mode, one batch per cycle on a fresh session, is
timed too, batch and whole cycle, and so is opening a session. Within a cycle,
the first batch (on a new server session, its caches cold) is set apart from
the later ones (where, with --prepared-statements, the statement is prepared).
A third series sends the worker's own statement alone, in autocommit, one round
trip like the bare one: it splits the worker's distance from the floor into
what its SQL costs and what its transaction and code around the SQL cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.context import BenchContext, BenchError
from benchmarks.dataset import restore_backlog
from benchmarks.stats import Distribution, ratio
from benchmarks.timing import (
    BatchRecorder,
    bare_batch,
    bare_batches,
    session_open_ms,
    worker_cycle,
    worker_statement,
)

SESSIONS_TIMED = 20


@dataclass(frozen=True, slots=True)
class BatchComparison:
    worker: Distribution  # ms per batch, inside drain cycles
    bare: Distribution  # ms per bare statement
    statement_only: Distribution  # ms of the worker's statement sent alone (autocommit)
    statement_bare: Distribution  # ms of the bare batches interleaved one by one with those
    median_ratio: float | None  # worker / bare
    p95_ratio: float | None
    single_batch: Distribution  # ms of the batch of a default (one-batch) cycle
    single_cycle: Distribution  # ms of that whole cycle: connect, purge, batch, backlog count
    first_batches: Distribution  # the first batch of each worker cycle
    later_batches: Distribution | None  # the batches after it
    session_open: Distribution  # ms to open (and close) a session like the worker's
    rounds: int
    batches_per_round: int
    worker_samples_ms: tuple[float, ...]  # in the order they ran, for a look at outliers
    bare_samples_ms: tuple[float, ...]


async def measure_batches(ctx: BenchContext) -> BatchComparison:
    plan, size = ctx.plan, ctx.plan.batch_size
    await restore_backlog(ctx.store, ctx.as_of)
    ctx.progress(
        f"a. {plan.batch_rounds} rounds of {plan.batches_per_round} worker and "
        f"{plan.batches_per_round} bare batches"
    )
    recorder, bare_ms = await alternate(ctx, plan.batch_rounds, plan.batches_per_round)
    ctx.progress(f"a. {plan.statement_batches} worker statements alone, each beside a bare one")
    statement_ms, paired_ms = [], []
    for _ in range(plan.statement_batches):
        statement = await worker_statement(ctx.store, ctx.as_of, size)
        paired = await bare_batch(ctx.store, ctx.as_of, size)
        _require_full(ctx, [statement.rows, paired.rows])
        statement_ms.append(statement.ms)
        paired_ms.append(paired.ms)
    ctx.progress(f"a. {plan.single_batch_cycles} default cycles of one batch")
    single = BatchRecorder()
    one_batch = ctx.worker_options(1)
    for _ in range(plan.single_batch_cycles):
        await worker_cycle(one_batch, ctx.as_of, single)
    _require_full(ctx, [b.expired_count for b in single.batches])
    worker, bare = Distribution.of(recorder.batch_ms()), Distribution.of(bare_ms)
    first = [b.duration_ms for b in recorder.batches if b.number == 1]
    later = [b.duration_ms for b in recorder.batches if b.number > 1]
    return BatchComparison(
        worker=worker,
        bare=bare,
        statement_only=Distribution.of(statement_ms),
        statement_bare=Distribution.of(paired_ms),
        median_ratio=ratio(worker.median, bare.median),
        p95_ratio=ratio(worker.p95, bare.p95),
        single_batch=Distribution.of(single.batch_ms()),
        single_cycle=Distribution.of([c.duration_ms for c in single.cycles]),
        first_batches=Distribution.of(first),
        later_batches=Distribution.of(later) if later else None,
        session_open=Distribution.of(await session_open_ms(ctx.url, SESSIONS_TIMED)),
        rounds=plan.batch_rounds,
        batches_per_round=plan.batches_per_round,
        worker_samples_ms=tuple(recorder.batch_ms()),
        bare_samples_ms=tuple(bare_ms),
    )


async def alternate(
    ctx: BenchContext, rounds: int, batches: int, first: int = 0
) -> tuple[BatchRecorder, list[float]]:
    """Rounds of one worker drain cycle of `batches` batches and as many bare batches,
    the worker first in even rounds (counted from `first`), the bare ones in odd rounds;
    every batch must be full."""
    drain = ctx.worker_options(batches)
    recorder, bare_ms = BatchRecorder(), []
    for number in range(first, first + rounds):
        if number % 2:
            bare_ms += await _bare(ctx, batches)
        await worker_cycle(drain, ctx.as_of, recorder)
        if not number % 2:
            bare_ms += await _bare(ctx, batches)
    _require_full(ctx, [b.expired_count for b in recorder.batches])
    return recorder, bare_ms


async def _bare(ctx: BenchContext, count: int) -> list[float]:
    batches = await bare_batches(ctx.store, ctx.as_of, ctx.plan.batch_size, count)
    _require_full(ctx, [b.rows for b in batches])
    return [b.ms for b in batches]


def _require_full(ctx: BenchContext, rows: Sequence[int]) -> None:
    """A short batch would time less work: the backlog must outlast the section."""
    if any(n != ctx.plan.batch_size for n in rows):
        raise BenchError(
            f"a batch expired {min(rows)} rows, not {ctx.plan.batch_size}: the backlog ran out"
        )
