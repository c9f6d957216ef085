"""Section i: the bookings' p99 against the drain's rate, by `--drain-nice-ratio` and the
adaptive mode (`--drain-max-slowdown`).

The drains of section d's machinery (see beside), each beside the booking load, with a run
without a drain in every round: the bare loop flat out (the floor), the worker flat out, the
worker at each nice ratio of the plan (after a batch of t ms it rests ratio x t before the
next), and in the adaptive mode at each of the plan's slowdowns (it rests only after a batch
slower per row than its recent fastest by more than that). Each drain gives a point: its rate
(rows per second, over its whole time, rests in) as a share of the round's flat-out worker,
and the bookings' p99 beside it over the round's p99 without a drain. The target: a setting
whose p99 is at most TARGET_P99 x the p99 with no drain while it drains at TARGET_SHARE or
more of flat out; the least throttled such setting is the one to choose. Where none reaches
it, the report says what the floor was: the lowest p99 ratio of the settings that kept the
share.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.beside import Condition, Drainer, DrainKind, condition, run_rounds
from benchmarks.context import BenchContext
from benchmarks.drain_rate_section import rate_ratio
from benchmarks.stats import Spread
from slot_expiration.options.settings import DEFAULT_DRAIN_MAX_SLOWDOWN, DEFAULT_DRAIN_NICE_RATIO

TARGET_P99 = 1.5  # the bookings' p99 beside the drain / with no drain, at most
TARGET_SHARE = 0.4  # the drain's rate / flat out, at least


@dataclass(frozen=True, slots=True)
class ThrottlePoint:
    """One setting: the drain beside the bookings, and its point on the curve."""

    nice_ratio: float  # 0: flat out
    max_slowdown: float  # the adaptive mode's (0: off)
    drain: Condition
    share_of_flat: Spread | None  # each round: its rate / the flat-out worker's

    @property
    def p99_vs_none(self) -> Spread | None:
        """Each round: the bookings' p99 beside it / with no drain."""
        return self.drain.p99_vs_none

    @property
    def meets(self) -> bool:
        return (
            self.share_of_flat is not None
            and self.p99_vs_none is not None
            and self.share_of_flat.median >= TARGET_SHARE
            and self.p99_vs_none.median <= TARGET_P99
        )


@dataclass(frozen=True, slots=True)
class ThrottleCurve:
    rounds: int
    backlog: int
    batch_size: int
    no_drain: Condition
    bare_flat: Condition
    points: tuple[ThrottlePoint, ...]  # flat out first, then each nice ratio

    @property
    def default_ratio(self) -> float:
        return DEFAULT_DRAIN_NICE_RATIO

    @property
    def default_slowdown(self) -> float:
        return DEFAULT_DRAIN_MAX_SLOWDOWN

    @property
    def at_default(self) -> ThrottlePoint | None:
        """The worker at its default --drain-nice-ratio, if it was measured."""
        return next(
            (
                p
                for p in self.points
                if (p.nice_ratio, p.max_slowdown) == (self.default_ratio, self.default_slowdown)
            ),
            None,
        )

    @property
    def chosen(self) -> ThrottlePoint | None:
        """The least throttled setting that meets the target, if one does."""
        return next((p for p in self.points if p.meets), None)

    @property
    def floor(self) -> ThrottlePoint | None:
        """Of the settings that kept TARGET_SHARE of flat out, the lowest p99 ratio."""
        kept = [
            p
            for p in self.points
            if p.share_of_flat is not None
            and p.p99_vs_none is not None
            and p.share_of_flat.median >= TARGET_SHARE
        ]
        return min(kept, key=lambda p: p.p99_vs_none.median if p.p99_vs_none else 0.0, default=None)


async def measure_throttle(ctx: BenchContext) -> ThrottleCurve:
    plan, size = ctx.plan.throttle, ctx.plan.batch_size * 4  # the default drain batch: 2,000
    flag = ctx.drain_batch_size_flag
    conditions = (
        Drainer(DrainKind.NONE),
        Drainer(DrainKind.BARE, size),
        Drainer(DrainKind.WORKER, size, drain_batch_size_flag=flag),
        *(
            Drainer(DrainKind.WORKER, size, drain_batch_size_flag=flag, nice_ratio=r)
            for r in plan.nice_ratios
        ),
        *(
            Drainer(DrainKind.WORKER, size, drain_batch_size_flag=flag, max_slowdown=m)
            for m in plan.max_slowdowns
        ),
    )
    rounds = await run_rounds(ctx, conditions, plan.rounds, "i")
    by_condition = [[runs[i] for runs in rounds] for i in range(len(conditions))]
    none, bare, flat = by_condition[0], by_condition[1], by_condition[2]
    return ThrottleCurve(
        rounds=plan.rounds,
        backlog=ctx.plan.backlog,
        batch_size=size,
        no_drain=condition(none, none),
        bare_flat=condition(bare, none),
        points=tuple(
            ThrottlePoint(
                nice_ratio=drainer.nice_ratio,
                max_slowdown=drainer.max_slowdown,
                drain=condition(runs, none),
                share_of_flat=rate_ratio(runs, flat),
            )
            for drainer, runs in zip(conditions[2:], by_condition[2:], strict=True)
        ),
    )
