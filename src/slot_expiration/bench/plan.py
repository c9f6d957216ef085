"""How big each part of a benchmark run is: the quick smoke run, the default run, the full one.

The default run ends in a few minutes on two cores; `--quick` is a smoke run
of well under a minute (CI); `--full` adds the table of 10 million slots to
the growth section.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum


class Mode(StrEnum):
    QUICK = "quick"
    DEFAULT = "default"
    FULL = "full"


class Section(StrEnum):
    """The sections of issue 8, in the order a run measures them."""

    BATCH = "a"  # one batch of 500: worker vs bare statement
    DRAIN = "b"  # draining a backlog: worker vs a loop of the bare statement
    PARALLEL = "c"  # the same drain with 1, 2 and 4 worker processes
    BOOKING = "d"  # booking latency with and without a worker draining
    MEMORY = "f"  # the worker's resident memory, idle and draining
    GROWTH = "e"  # one batch on ever larger tables, with and without dead tuples


@dataclass(frozen=True, slots=True)
class TableShape:
    """A slot table: how many rows, how many of them due, whose."""

    slots: int
    due: int
    consultants: int
    tenants: int


@dataclass(frozen=True, slots=True)
class BookingLoad:
    """The pgbench booking load of section d."""

    seconds: float  # how long each pgbench run lasts
    warmup_seconds: float  # left out of the baseline, and before the worker starts
    rate_per_second: int  # scheduled bookings per second (pgbench --rate)
    clients: int
    candidates: int  # future Available slots the bookings pick from
    pairs: int  # runs alone and beside a worker, in turn


@dataclass(frozen=True, slots=True)
class GrowthPlan:
    sizes: tuple[int, ...]
    dead_share: float  # of the table, expired before the "dead tuples" measurement
    rounds: int  # per phase: rounds of (a worker cycle of `batches`, `batches` bare ones)
    batches: int
    consultants: int
    tenants: int

    def reserve(self, batch_size: int) -> int:
        """Due rows the three measured phases consume (clean, dead, vacuumed), and one
        batch more, so that the plan read after the last phase still has rows to take."""
        return (3 * self.rounds * 2 * self.batches + 1) * batch_size

    def shape(self, slots: int, batch_size: int) -> TableShape:
        due = round(slots * self.dead_share) + self.reserve(batch_size)
        return TableShape(slots, min(due, slots), self.consultants, self.tenants)


@dataclass(frozen=True, slots=True)
class BenchPlan:
    mode: Mode
    table: TableShape  # the table of sections a, b, c, d and f; its due rows are the backlog
    batch_rounds: int  # section a: rounds of (a worker drain cycle, as many bare batches)
    batches_per_round: int
    single_batch_cycles: int  # section a: cycles in the default mode (one batch each)
    statement_batches: int  # section a: the worker's statement alone, each beside a bare one
    processes: tuple[int, ...]
    booking: BookingLoad
    growth: GrowthPlan
    idle_seconds: float  # section f: how long the idle worker is watched
    batch_size: int = 500

    @property
    def backlog(self) -> int:
        return self.table.due

    @property
    def batch_section_rows(self) -> int:
        """Rows section a expires: its worker and bare batches, the worker's statement alone
        (each beside one more bare batch), and its one-batch cycles."""
        paired = self.batch_rounds * self.batches_per_round + self.statement_batches
        batches = 2 * paired + self.single_batch_cycles
        return batches * self.batch_size


def plan_for(mode: Mode) -> BenchPlan:
    return _PLANS[mode]


_DEFAULT = BenchPlan(
    mode=Mode.DEFAULT,
    table=TableShape(slots=1_000_000, due=200_000, consultants=2_000, tenants=200),
    batch_rounds=5,
    batches_per_round=20,
    single_batch_cycles=20,
    statement_batches=50,
    processes=(1, 2, 4),
    booking=BookingLoad(
        seconds=12,
        warmup_seconds=2,
        rate_per_second=200,
        clients=4,
        candidates=100_000,
        pairs=2,
    ),
    growth=GrowthPlan(
        sizes=(100_000, 1_000_000),
        dead_share=0.2,
        rounds=2,
        batches=6,
        consultants=2_000,
        tenants=200,
    ),
    idle_seconds=3,
)

_PLANS = {
    Mode.DEFAULT: _DEFAULT,
    Mode.FULL: replace(
        _DEFAULT,
        mode=Mode.FULL,
        growth=replace(_DEFAULT.growth, sizes=(100_000, 1_000_000, 10_000_000)),
    ),
    Mode.QUICK: BenchPlan(
        mode=Mode.QUICK,
        table=TableShape(slots=50_000, due=20_000, consultants=200, tenants=20),
        batch_rounds=2,
        batches_per_round=5,
        single_batch_cycles=3,
        statement_batches=5,
        processes=(1, 2, 4),
        booking=BookingLoad(
            seconds=4,
            warmup_seconds=1,
            rate_per_second=100,
            clients=2,
            candidates=5_000,
            pairs=1,
        ),
        growth=GrowthPlan(
            sizes=(20_000, 50_000),
            dead_share=0.2,
            rounds=1,
            batches=3,
            consultants=200,
            tenants=20,
        ),
        idle_seconds=1,
    ),
}
