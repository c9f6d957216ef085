"""Section g: how fast the backlog drains, by batch size, and what the bookings feel.

The drains of section d's machinery (see beside), flat out (or at the run's
`--batch-pause-seconds`): the worker and the bare loop at each batch size of
the plan, and the single statement a pg_cron job would run (every due row in one
UPDATE), each beside the booking load, with a run without a drain in every
round. Each drain's rate is its rows over its time (first statement to end). The
figure: the worker's rate at its fastest batch size / the single statement's, per
round. The worker's batches at each size are timed too (between its batch log
lines), for the budget: a batch must end well within `--max-cycle-seconds`.

The worker's drains here are asked for with `--drain-batch-size` (the size of a
drain's batches after the first), the first batch at the run's `--batch-size`
(BenchContext.drain_batch_size_flag False gives every batch `--batch-size`).
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.beside import (
    Condition,
    ConditionRun,
    Drainer,
    DrainKind,
    condition,
    run_rounds,
)
from benchmarks.context import BenchContext
from benchmarks.stats import Spread, rate, ratio


@dataclass(frozen=True, slots=True)
class BatchSizeDrains:
    batch_size: int
    worker: Condition
    bare: Condition
    worker_vs_single: Spread | None  # each round: worker rate / single statement rate
    bare_vs_single: Spread | None


@dataclass(frozen=True, slots=True)
class DrainRates:
    rounds: int
    backlog: int
    pause_seconds: float
    drain_batch_size_flag: bool  # the worker's drains were asked for with --drain-batch-size
    no_drain: Condition
    single: Condition
    sizes: tuple[BatchSizeDrains, ...]

    @property
    def best(self) -> BatchSizeDrains:
        """The batch size at which the worker drained fastest (median over rounds)."""
        return max(self.sizes, key=lambda s: _median(s.worker.rows_per_second))

    @property
    def best_batch_size(self) -> int:
        return self.best.batch_size

    @property
    def best_vs_single(self) -> Spread | None:
        return self.best.worker_vs_single


def _median(spread: Spread | None) -> float:
    return spread.median if spread is not None else 0.0


async def measure_drain_rates(ctx: BenchContext) -> DrainRates:
    plan, flag = ctx.plan.drain_rate, ctx.drain_batch_size_flag
    pause = ctx.worker.batch_pause_seconds
    conditions = (
        Drainer(DrainKind.NONE),
        Drainer(DrainKind.SINGLE),
        *(Drainer(DrainKind.WORKER, n, pause, flag) for n in plan.batch_sizes),
        *(Drainer(DrainKind.BARE, n, pause) for n in plan.batch_sizes),
    )
    ctx.progress(
        "g. the worker's drain batch size given as "
        + ("--drain-batch-size" if flag else "--batch-size (it has no --drain-batch-size)")
    )
    rounds = await run_rounds(ctx, conditions, plan.rounds, "g")
    by_condition = [[runs[i] for runs in rounds] for i in range(len(conditions))]
    none, single = by_condition[0], by_condition[1]
    count = len(plan.batch_sizes)
    workers, bares = by_condition[2 : 2 + count], by_condition[2 + count :]
    return DrainRates(
        rounds=plan.rounds,
        backlog=ctx.plan.backlog,
        pause_seconds=pause,
        drain_batch_size_flag=flag,
        no_drain=condition(none, none),
        single=condition(single, none),
        sizes=tuple(
            BatchSizeDrains(
                batch_size=size,
                worker=condition(worker, none),
                bare=condition(bare, none),
                worker_vs_single=rate_ratio(worker, single),
                bare_vs_single=rate_ratio(bare, single),
            )
            for size, worker, bare in zip(plan.batch_sizes, workers, bares, strict=True)
        ),
    )


def rate_ratio(runs: list[ConditionRun], references: list[ConditionRun]) -> Spread | None:
    """Each round's drain rate of one condition / of another."""
    return Spread.of(
        [ratio(_rate(run), _rate(ref)) for run, ref in zip(runs, references, strict=True)]
    )


def _rate(run: ConditionRun) -> float:
    drained = run.drained
    return rate(drained.rows, drained.end - drained.start) if drained is not None else 0.0
