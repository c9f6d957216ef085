"""How far a drain has come: the backlog it counted at its start, what it expired since and
in how long; its rate and what is left at that rate (the terminal's bar and the logs say it).

A drain (a cycle of more than one batch, `--max-batches-per-cycle` other than 1) counts the
rows due at its `as_of` before its first batch, up to DRAIN_COUNT_CAP: an index-only walk of
the worker's index, measured at about 90 ms per million due rows (docs/operations.md). The
cycle's own count after its batches stops at BACKLOG_COUNT_CAP, too low to time a drain of
300,000 rows by.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

DRAIN_COUNT_CAP: Final = 1_000_000


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
    def rows_per_second(self) -> float | None:
        """Rows expired per second so far; None before any time has passed."""
        return self.expired / self.seconds if self.seconds > 0 else None

    @property
    def left(self) -> int:
        """Rows of the count at its start not expired yet (at least that many when capped;
        rows booked, archived or rejected meanwhile are still in it)."""
        return max(self.backlog_at_start - self.expired, 0)

    @property
    def eta_seconds(self) -> float | None:
        """How long what is left takes at the rate so far (at least that when capped);
        None until a row was expired."""
        rate = self.rows_per_second
        return None if not rate else self.left / rate
