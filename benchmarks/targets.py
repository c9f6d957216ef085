"""The targets, set beside the measurements: met, not met, or not measured.

They are reported, never asserted: a run on a busy machine is still a run. A target
measured in rounds is judged on the median of its rounds, and needs `min_samples`
rounds (a smoke run's single round is not a measurement).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from benchmarks.stats import Spread

GROWTH_REFERENCE_SLOTS = 100_000
GROWTH_TARGET_SLOTS = 10_000_000
MIN_ROUNDS = 5


class Verdict(StrEnum):
    MET = "met"
    NOT_MET = "not met"
    NOT_MEASURED = "not measured"


@dataclass(frozen=True, slots=True)
class Target:
    section: str
    what: str
    limit: float  # the value must be at most this (at least, if at_least)
    goal: float | None = None  # and ideally at most (at least) this
    unit: str = "x"
    at_least: bool = False
    min_samples: int = 0  # fewer samples behind the value: not measured
    condition: str = ""  # said after the limit: "flat out", say
    samples: str = "samples"  # what a sample is: "rounds", "batches"

    def check(
        self,
        value: float | None,
        why_not_measured: str = "",
        samples: int | None = None,
        spread: Spread | None = None,
    ) -> TargetCheck:
        if value is not None and samples is not None and samples < self.min_samples:
            why = f"{samples} of the {self.min_samples} {self.samples} it needs"
            return TargetCheck(self, None, why, spread)
        return TargetCheck(self, value, why_not_measured if value is None else "", spread)

    def of_rounds(self, spread: Spread | None, why_not_measured: str) -> TargetCheck:
        """Judged on the median of the rounds, with the rounds' range shown."""
        if spread is None:
            return self.check(None, why_not_measured)
        return self.check(spread.median, samples=len(spread.values), spread=spread)

    def meets(self, value: float, bound: float) -> bool:
        return value >= bound if self.at_least else value <= bound

    def describe(self) -> str:
        sign = ">=" if self.at_least else "<="
        limit = f"{sign} {self.limit:g}{self.unit if self.unit != 'x' else ''}"
        if self.condition:
            limit += f" {self.condition}"
        if self.min_samples:
            limit += f" with >= {self.min_samples} {self.samples}"
        return f"{limit} (goal {self.goal:g})" if self.goal is not None else limit


@dataclass(frozen=True, slots=True)
class TargetCheck:
    target: Target
    value: float | None
    why_not_measured: str = ""
    spread: Spread | None = None  # the rounds behind a value judged on their median

    @property
    def verdict(self) -> Verdict:
        if self.value is None:
            return Verdict.NOT_MEASURED
        return Verdict.MET if self.target.meets(self.value, self.target.limit) else Verdict.NOT_MET

    @property
    def goal_met(self) -> bool | None:
        if self.value is None or self.target.goal is None:
            return None
        return self.target.meets(self.value, self.target.goal)

    def describe(self) -> str:
        """`met`, `met (goal 1.1 not reached)`, `not met`, `not measured (why)`."""
        verdict = self.verdict
        if verdict is Verdict.NOT_MEASURED:
            return f"not measured ({self.why_not_measured})" if self.why_not_measured else verdict
        if verdict is Verdict.MET and self.goal_met is False:
            return f"met (goal {self.target.goal:g} not reached)"
        return verdict.value

    def result(self) -> str:
        """The value with its spread: `0.91 (0.88-0.95 over 5 rounds)`, `56.5 MB`, `-`."""
        if self.spread is not None:
            return self.spread.describe()
        if self.value is None:
            return "-"
        unit = self.target.unit if self.target.unit != "x" else ""
        return f"{self.value:.2f}{unit}"


BATCH_RATIO = Target("a", "worker / bare, one batch in a drain (median)", limit=1.2)
STATEMENT_RATIO = Target("a", "worker / bare, the statement alone (median)", limit=1.15)
DRAIN_RATIO = Target(
    "b",
    "worker / bare loop at the server's synchronous commit, time to drain the backlog",
    limit=0.95,
    min_samples=MIN_ROUNDS,
    samples="rounds",
)
BOOKING_P99 = Target(
    "d",
    "booking p99 beside the worker / beside the bare loop, same pace",
    limit=0.85,
    condition="flat out",
    min_samples=MIN_ROUNDS,
    samples="rounds",
)
GROWTH_RATIO = Target(
    "e",
    "one batch at 10 million slots / at 100 thousand (median)",
    limit=1.5,
    min_samples=50,
    samples="batches",
)
PARTITIONED_GROWTH = Target(
    "h",
    "one batch at 10 million slots / at 100 thousand, partitioned by month (median)",
    limit=1.5,
    min_samples=50,
    samples="batches",
)
IDLE_MEMORY = Target("f", "idle resident memory of `run`", limit=60.0, unit=" MB")
DRAIN_RATE = Target(
    "g",
    "drain rate at the default drain batch / the pg_cron job's single statement",
    limit=0.75,
    at_least=True,
    min_samples=MIN_ROUNDS,
    samples="rounds",
)
THROTTLED_P99 = Target(
    "i",
    "bookings' p99 beside the default drain / with no drain",
    limit=1.5,
    condition="while it drains at >= 40% of flat out",
    min_samples=MIN_ROUNDS,
    samples="rounds",
)
TARGETS = (
    BATCH_RATIO,
    STATEMENT_RATIO,
    DRAIN_RATIO,
    BOOKING_P99,
    GROWTH_RATIO,
    PARTITIONED_GROWTH,
    IDLE_MEMORY,
    DRAIN_RATE,
    THROTTLED_P99,
)
