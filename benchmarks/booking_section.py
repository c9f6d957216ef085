"""Section d: booking latency beside the worker's drain, beside the bare loop's, and alone.

pgbench books random future slots at a fixed rate with the slot context's own
book-slot statement (in a transaction, as the book operation sends it). Six
conditions, each run once per round, the order turned each round (see beside):
no drain; the worker draining the backlog flat out and paced (its
`--batch-pause-seconds`), batch for batch like the bare loop (its
`--drain-batch-size`, where it has one, equal to `--batch-size`); the worker flat
out with `--synchronous-commit on` (every batch waiting for its flush, as before
the worker committed asynchronously); the bare loop draining the same backlog
flat out and at the same pause, its commits at the server's setting. The
headline is each round's booking p99 beside the worker / beside the bare loop at
the same pace: the worker's own cost to the bookings, with what any drain of that
pace costs them set apart; each drain is also set beside the round's run without
one. Every ratio is given as its median over the rounds with its range.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.beside import (
    Condition,
    Drainer,
    DrainKind,
    condition,
    p99_ratio,
    run_rounds,
)
from benchmarks.context import BenchContext
from benchmarks.stats import Spread
from slot_expiration.options import SynchronousCommit


@dataclass(frozen=True, slots=True)
class BookingInterference:
    rate_per_second: int
    clients: int
    rounds: int
    pause_seconds: float  # of the paced drains
    backlog: int
    no_drain: Condition
    worker_flat: Condition
    bare_flat: Condition
    worker_paced: Condition
    bare_paced: Condition
    worker_synchronous: Condition  # flat out, --synchronous-commit on
    flat_p99_ratio: Spread | None  # each round: p99 beside the worker / beside the bare loop
    paced_p99_ratio: Spread | None
    synchronous_p99_ratio: Spread | None  # the same, the worker with synchronous commit on

    @property
    def drains(self) -> tuple[Condition, ...]:
        return (
            self.worker_flat,
            self.worker_synchronous,
            self.bare_flat,
            self.worker_paced,
            self.bare_paced,
        )

    @property
    def slots_booked(self) -> int:
        return sum(c.slots_booked for c in (self.no_drain, *self.drains))


def drainers(ctx: BenchContext) -> tuple[Drainer, ...]:
    """No drain, the worker and the bare loop flat out, both paced: the run's pause if it
    sets one, else the plan's."""
    size, flag = ctx.plan.batch_size, ctx.drain_batch_size_flag
    pause = ctx.worker.batch_pause_seconds or ctx.plan.booking.paced_pause_seconds
    return (
        Drainer(DrainKind.NONE),
        Drainer(DrainKind.WORKER, size, drain_batch_size_flag=flag),
        Drainer(DrainKind.BARE, size),
        Drainer(DrainKind.WORKER, size, pause, flag),
        Drainer(DrainKind.BARE, size, pause),
        Drainer(DrainKind.WORKER, size, 0.0, flag, SynchronousCommit.ON),
    )


async def measure_bookings(ctx: BenchContext) -> BookingInterference:
    load, conditions = ctx.plan.booking, drainers(ctx)
    rounds = await run_rounds(ctx, conditions, load.rounds, "d")
    none, worker_flat, bare_flat, worker_paced, bare_paced, worker_synchronous = (
        [runs[i] for runs in rounds] for i in range(len(conditions))
    )
    return BookingInterference(
        rate_per_second=load.rate_per_second,
        clients=load.clients,
        rounds=load.rounds,
        pause_seconds=conditions[3].pause_seconds,
        backlog=ctx.plan.backlog,
        no_drain=condition(none, none),
        worker_flat=condition(worker_flat, none),
        bare_flat=condition(bare_flat, none),
        worker_paced=condition(worker_paced, none),
        bare_paced=condition(bare_paced, none),
        worker_synchronous=condition(worker_synchronous, none),
        flat_p99_ratio=p99_ratio(worker_flat, bare_flat),
        paced_p99_ratio=p99_ratio(worker_paced, bare_paced),
        synchronous_p99_ratio=p99_ratio(worker_synchronous, bare_flat),
    )
