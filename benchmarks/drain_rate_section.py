"""Section g: how fast the backlog drains, by batch size, against the single statement that a
pg_cron job runs, and what the bookings feel.

The drains of section d's machinery (see beside), flat out (or at the run's
`--batch-pause-seconds`), each beside the booking load, with a run without a drain
in every round: the worker at each batch size of the plan, the bare loop at the
plan's bare sizes (the default drain batch: the floor there), and the peer: every
due row in one UPDATE run as a real pg_cron job and timed by pg_cron itself
(`cron.job_run_details`), or, where pg_cron is not installed, sent and timed by the
benchmark (the report says which). Each drain's rate is its rows over its time
(first statement to end). The figures, per round: the worker's rate at the default
drain batch / the peer's (the target), and at its fastest size. The worker's
batches at each size are timed too (between its batch log lines), for the budget: a
batch must end well within `--max-cycle-seconds`.

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
from slot_expiration.options.settings import DEFAULT_DRAIN_BATCH_SIZE


@dataclass(frozen=True, slots=True)
class BatchSizeDrains:
    batch_size: int
    worker: Condition
    bare: Condition | None  # None: the bare loop was not run at this size
    worker_vs_single: Spread | None  # each round: worker rate / the peer's rate
    bare_vs_single: Spread | None


@dataclass(frozen=True, slots=True)
class DrainRates:
    rounds: int
    backlog: int
    pause_seconds: float
    drain_batch_size_flag: bool  # the worker's drains were asked for with --drain-batch-size
    no_drain: Condition
    single: Condition  # the peer: the pg_cron job, or the statement the benchmark sent
    sizes: tuple[BatchSizeDrains, ...]
    default_batch_size: int = DEFAULT_DRAIN_BATCH_SIZE

    @property
    def peer_is_cron(self) -> bool:
        return self.single.kind == DrainKind.CRON.value

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

    @property
    def at_default(self) -> BatchSizeDrains | None:
        """The drains at the worker's default --drain-batch-size, if it was measured."""
        return next((s for s in self.sizes if s.batch_size == self.default_batch_size), None)

    @property
    def default_vs_single(self) -> Spread | None:
        default = self.at_default
        return default.worker_vs_single if default is not None else None


def _median(spread: Spread | None) -> float:
    return spread.median if spread is not None else 0.0


async def measure_drain_rates(ctx: BenchContext) -> DrainRates:
    plan, flag = ctx.plan.drain_rate, ctx.drain_batch_size_flag
    pause = ctx.worker.batch_pause_seconds
    peer = DrainKind.CRON if await ctx.store.cron_available() else DrainKind.SINGLE
    conditions = (
        Drainer(DrainKind.NONE),
        Drainer(peer),
        *(Drainer(DrainKind.WORKER, n, pause, flag) for n in plan.batch_sizes),
        *(Drainer(DrainKind.BARE, n, pause) for n in plan.bare_sizes),
    )
    ctx.progress(
        "g. the worker's drain batch size given as "
        + ("--drain-batch-size" if flag else "--batch-size (it has no --drain-batch-size)")
        + f"; the peer: {peer.value}"
    )
    rounds = await run_rounds(ctx, conditions, plan.rounds, "g")
    by_condition = [[runs[i] for runs in rounds] for i in range(len(conditions))]
    none, single = by_condition[0], by_condition[1]
    count = len(plan.batch_sizes)
    workers = dict(zip(plan.batch_sizes, by_condition[2 : 2 + count], strict=True))
    bares = dict(zip(plan.bare_sizes, by_condition[2 + count :], strict=True))
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
                bare=condition(bares[size], none) if size in bares else None,
                worker_vs_single=rate_ratio(worker, single),
                bare_vs_single=rate_ratio(bares[size], single) if size in bares else None,
            )
            for size, worker in workers.items()
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
