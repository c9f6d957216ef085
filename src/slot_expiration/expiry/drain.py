"""How far a drain has come: the backlog it counted at its start, what it expired since and
in how long; its rate and what is left at that rate (the terminal's bar and the logs say it).

A drain (a cycle of more than one batch, `--max-batches-per-cycle` other than 1) counts the
rows due at its `as_of` before its first batch, up to DRAIN_COUNT_CAP: an index-only walk of
the worker's index. The cycle's own count after its batches stops at BACKLOG_COUNT_CAP, too
low to time a drain of 300,000 rows by.

`Pace` is the one arithmetic of a rate and an ETA: a drain's, from its own clock, and the
deployment's the page and `status` read from the history (status/report.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

DRAIN_COUNT_CAP: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class Pace:
    """`rows` expired in `seconds`: a rate, and how long some rows left take at it."""

    rows: int
    seconds: float

    @property
    def rows_per_second(self) -> float | None:
        """None before any time has passed."""
        return self.rows / self.seconds if self.seconds > 0 else None

    def eta_seconds(self, left: int) -> float | None:
        """How long `left` rows take at this rate; None until a row was expired (no rate
        to go by), 0 when none is left."""
        if left <= 0:
            return 0.0
        rate = self.rows_per_second
        return left / rate if rate else None


@dataclass(frozen=True, slots=True)
class DrainProgress:
    """The backlog counted at the drain's start (`capped`: the count stopped at
    DRAIN_COUNT_CAP, the backlog was at least that), the rows it expired since, and the
    `seconds` since that count: its batches and whatever passed between them (pauses,
    waits), which the rate counts too."""

    backlog_at_start: int
    expired: int
    seconds: float

    @property
    def capped(self) -> bool:
        return self.backlog_at_start >= DRAIN_COUNT_CAP

    @property
    def pace(self) -> Pace:
        return Pace(self.expired, self.seconds)

    @property
    def rows_per_second(self) -> float | None:
        return self.pace.rows_per_second

    @property
    def left(self) -> int:
        """Rows of the count at its start not expired yet (at least that many when capped;
        rows booked, archived or rejected meanwhile are still in it)."""
        return max(self.backlog_at_start - self.expired, 0)

    @property
    def eta_seconds(self) -> float | None:
        """How long what is left takes at the rate so far (at least that when capped)."""
        return self.pace.eta_seconds(self.left)


class DrainWatch:
    """A drain's count at its start, and its clock started then: each batch's progress is
    read against both."""

    def __init__(self, backlog: int, monotonic: Callable[[], float]) -> None:
        self.backlog = backlog
        self._monotonic = monotonic
        self._started = monotonic()

    def progress(self, expired: int) -> DrainProgress:
        return DrainProgress(self.backlog, expired, self._monotonic() - self._started)
