"""How big each part of a benchmark run is: the quick smoke run, the default run, the full one.

The default run ends in about half an hour on two cores (sections b, d and g, drains
side by side in five rounds, take most of it); `--quick` is a smoke run of a minute
or two (CI; pg_cron's job waits for a minute's start); `--full` adds the tables of
10 million slots to the growth sections (e and h).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum


class Mode(StrEnum):
    QUICK = "quick"
    DEFAULT = "default"
    FULL = "full"


class Section(StrEnum):
    """The benchmark's sections, in the order a run measures them."""

    BATCH = "a"  # one batch of 500: worker vs bare statement
    DRAIN = "b"  # draining a backlog: worker vs a loop of the bare statement, in rounds
    PARALLEL = "c"  # the same drain with 1, 2 and 4 worker processes
    BOOKING = "d"  # booking latency beside the worker's drain, the bare loop's, and none
    DRAIN_RATE = "g"  # drain rate by batch size: worker, bare loop, the pg_cron job
    # the bookings' p99 against the drain's rate, by nice ratio and adaptive setting: on the
    # shared table and its booking candidates, before e and h load tables of their own
    THROTTLE = "i"
    MEMORY = "f"  # the worker's resident memory, idle and draining
    GROWTH = "e"  # one batch on ever larger tables, with and without dead tuples
    PARTITIONED = "h"  # a calendar partitioned by month (pg_partman) against a plain one


@dataclass(frozen=True, slots=True)
class TableShape:
    """A slot table: how many rows, how many of them due, whose."""

    slots: int
    due: int
    consultants: int
    tenants: int


@dataclass(frozen=True, slots=True)
class BookingLoad:
    """The pgbench booking load of sections d and g."""

    seconds: float  # how long a pgbench run without a drain lasts (at least, with one)
    warmup_seconds: float  # left out of the baseline, and before a drain starts
    rate_per_second: int  # scheduled bookings per second (pgbench --rate)
    clients: int
    candidates: int  # future Available slots the bookings pick from
    rounds: int  # d: rounds of (no drain, worker and bare loop, flat out and paced)
    paced_pause_seconds: float  # d: the pause of the paced drains (unless the run sets one)


@dataclass(frozen=True, slots=True)
class DrainRatePlan:
    """Section g: drains by batch size, each beside the booking load."""

    batch_sizes: tuple[int, ...]  # the worker's
    bare_sizes: tuple[int, ...]  # the bare loop's, of batch_sizes
    rounds: int  # rounds of (no drain, the peer, the worker and the bare loop at each size)

    def __post_init__(self) -> None:
        if not set(self.bare_sizes) <= set(self.batch_sizes):
            raise ValueError("the bare loop's sizes must be among the worker's")


@dataclass(frozen=True, slots=True)
class ThrottlePlan:
    """Section i: the worker's drain at each nice ratio, beside the booking load."""

    nice_ratios: tuple[float, ...]  # besides flat out (0)
    max_slowdowns: tuple[float, ...]  # the adaptive mode's settings
    rounds: int  # rounds of (no drain, the bare loop and the worker flat out, each ratio)


@dataclass(frozen=True, slots=True)
class PartitionPlan:
    """Section h: the same calendar plain and partitioned by month, at each size."""

    sizes: tuple[int, ...]
    months: int  # the table's slots start over this many months, up to now
    future_days: int  # and this many days ahead of now
    rounds: int  # per table: rounds of (a worker cycle of `batches`, `batches` bare ones)
    batches: int
    drain_rows: int  # the drain whose rate and WAL are measured
    consultants: int
    tenants: int
    premake: int = 2  # pg_partman's partitions made ahead of the current month
    max_due_share: float = 0.5  # of a table, due at most

    def growth(self) -> GrowthPlan:
        """The same rounds as section e's clean phase (growth_section runs them)."""
        return GrowthPlan(
            sizes=self.sizes,
            dead_share=0.0,
            rounds=self.rounds,
            batches=self.batches,
            consultants=self.consultants,
            tenants=self.tenants,
            max_due_share=self.max_due_share,
        )

    def due(self, slots: int, batch_size: int) -> int:
        """Due rows of a table: a round's batches (the rounds put them back as they go)
        and the drain, within the share a table may hold."""
        rounds = self.growth().round_rows(batch_size) + batch_size
        return min(max(rounds, self.drain_rows), round(slots * self.max_due_share))


@dataclass(frozen=True, slots=True)
class GrowthPlan:
    sizes: tuple[int, ...]
    dead_share: float  # of the table, expired before the "dead tuples" measurement
    rounds: int  # per phase: rounds of (a worker cycle of `batches`, `batches` bare ones)
    batches: int
    consultants: int
    tenants: int
    max_due_share: float = 0.6  # of a table, due at most (the rest history and future)

    def round_rows(self, batch_size: int) -> int:
        """Due rows one round takes: its worker batches and as many bare ones."""
        return 2 * self.batches * batch_size

    def reserve(self, slots: int, batch_size: int) -> int:
        """Due rows besides the wave: the three measured phases (clean, dead, vacuumed) and
        one batch more for the plans read after a phase, or, where the table cannot hold
        that many, what it can (a phase then puts the rows its batches expired back
        between rounds: see growth_section)."""
        whole = 3 * self.rounds * self.round_rows(batch_size) + batch_size
        room = round(slots * self.max_due_share) - round(slots * self.dead_share)
        return min(whole, room)

    def shape(self, slots: int, batch_size: int) -> TableShape:
        due = round(slots * self.dead_share) + self.reserve(slots, batch_size)
        return TableShape(slots, min(due, slots), self.consultants, self.tenants)

    @property
    def samples_per_phase(self) -> int:
        return self.rounds * self.batches


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
    drain_rate: DrainRatePlan
    throttle: ThrottlePlan
    growth: GrowthPlan
    partitioned: PartitionPlan
    idle_seconds: float  # section f: how long the idle worker is watched
    drain_rounds: int = 5  # section b: rounds of (the worker's two drains, the bare loop's two)
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
        seconds=10,
        warmup_seconds=2,
        rate_per_second=200,
        clients=4,
        candidates=100_000,
        rounds=5,
        paced_pause_seconds=0.02,
    ),
    drain_rate=DrainRatePlan(batch_sizes=(500, 2_000, 5_000), bare_sizes=(2_000,), rounds=5),
    throttle=ThrottlePlan(nice_ratios=(0.5, 1.0, 2.0, 4.0), max_slowdowns=(1.5, 3.0), rounds=5),
    growth=GrowthPlan(
        sizes=(100_000, 1_000_000),
        dead_share=0.2,
        rounds=5,
        batches=10,
        consultants=2_000,
        tenants=200,
    ),
    partitioned=PartitionPlan(
        sizes=(100_000, 1_000_000),
        months=24,
        future_days=28,
        rounds=5,
        batches=10,
        drain_rows=40_000,
        consultants=200,
        tenants=20,
    ),
    idle_seconds=3,
)

_PLANS = {
    Mode.DEFAULT: _DEFAULT,
    Mode.FULL: replace(
        _DEFAULT,
        mode=Mode.FULL,
        growth=replace(_DEFAULT.growth, sizes=(100_000, 1_000_000, 10_000_000)),
        partitioned=replace(_DEFAULT.partitioned, sizes=(100_000, 10_000_000)),
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
            seconds=3,
            warmup_seconds=1,
            rate_per_second=100,
            clients=2,
            candidates=5_000,
            rounds=1,
            paced_pause_seconds=0.02,
        ),
        drain_rate=DrainRatePlan(batch_sizes=(500, 2_000), bare_sizes=(2_000,), rounds=1),
        throttle=ThrottlePlan(nice_ratios=(1.0,), max_slowdowns=(1.5,), rounds=1),
        growth=GrowthPlan(
            sizes=(20_000, 50_000),
            dead_share=0.2,
            rounds=1,
            batches=3,
            consultants=200,
            tenants=20,
        ),
        partitioned=PartitionPlan(
            sizes=(20_000, 50_000),
            months=24,
            future_days=28,
            rounds=1,
            batches=3,
            drain_rows=4_000,
            consultants=20,
            tenants=5,
        ),
        idle_seconds=1,
        drain_rounds=1,
    ),
}
