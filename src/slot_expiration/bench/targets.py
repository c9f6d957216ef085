"""The targets of issue 8, set beside the measurements: met, not met, or not measured.

They are reported, never asserted: a run on a busy machine is still a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

GROWTH_REFERENCE_SLOTS = 100_000
GROWTH_TARGET_SLOTS = 10_000_000


class Verdict(StrEnum):
    MET = "met"
    NOT_MET = "not met"
    NOT_MEASURED = "not measured"


@dataclass(frozen=True, slots=True)
class Target:
    section: str
    what: str
    limit: float  # the value must be at most this
    goal: float | None = None  # and ideally at most this
    unit: str = "x"

    def check(self, value: float | None, why_not_measured: str = "") -> TargetCheck:
        return TargetCheck(self, value, why_not_measured if value is None else "")

    def describe(self) -> str:
        limit = f"<= {self.limit:g}{self.unit if self.unit != 'x' else ''}"
        return f"{limit} (goal {self.goal:g})" if self.goal is not None else limit


@dataclass(frozen=True, slots=True)
class TargetCheck:
    target: Target
    value: float | None
    why_not_measured: str = ""

    @property
    def verdict(self) -> Verdict:
        if self.value is None:
            return Verdict.NOT_MEASURED
        return Verdict.MET if self.value <= self.target.limit else Verdict.NOT_MET

    @property
    def goal_met(self) -> bool | None:
        if self.value is None or self.target.goal is None:
            return None
        return self.value <= self.target.goal

    def describe(self) -> str:
        """`met`, `met (goal 1.1 not reached)`, `not met`, `not measured (why)`."""
        verdict = self.verdict
        if verdict is Verdict.NOT_MEASURED:
            return f"not measured ({self.why_not_measured})" if self.why_not_measured else verdict
        if verdict is Verdict.MET and self.goal_met is False:
            return f"met (goal {self.target.goal:g} not reached)"
        return verdict.value


BATCH_RATIO = Target("a", "worker / bare, one batch (median)", limit=1.3, goal=1.1)
DRAIN_RATIO = Target("b", "worker / bare, time to drain the backlog", limit=1.3, goal=1.1)
BOOKING_P99 = Target("d", "booking p99 with the worker draining / without", limit=1.5)
GROWTH_RATIO = Target("e", "one batch at 10 million slots / at 100 thousand", limit=2.0)
IDLE_MEMORY = Target("f", "idle resident memory of `run`", limit=80.0, unit=" MB")
TARGETS = (BATCH_RATIO, DRAIN_RATIO, BOOKING_P99, GROWTH_RATIO, IDLE_MEMORY)
