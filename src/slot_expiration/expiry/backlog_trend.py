"""Whether the backlog comes down, judged from successful cycles: one rule for the worker's
`calendar_slot_expiration_backlog_change` (which the backlog alert reads) and for
`status --check` and the page (which read the cycle history).

A trend is read across a run of consecutive successful cycles, never across a cycle that
failed: while cycles fail nothing is expired and the backlog may not even be counted, so
the first count after an outage is higher than the last one before it, though the worker
drains again at full rate. Over the trend window (half an hour, or three intervals when
that is longer: a worker that ticks hourly is not judged between two of its cycles), the
change is the latest backlog less the one the run's cycle at least a window older left
(or the run's first, when the run is younger). Where both counts stopped at the cap, the
count shows no change: the slots expired in between stand for it (a worker that expires
nothing above the cap is stuck; one that expires, as far as can be told, drains).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from slot_expiration.expiry.result import BACKLOG_COUNT_CAP

TREND_WINDOW: Final = timedelta(minutes=30)
TREND_INTERVALS: Final = 3


def trend_window(interval_seconds: float) -> timedelta:
    """Half an hour, or three intervals when that is longer."""
    return max(TREND_WINDOW, TREND_INTERVALS * timedelta(seconds=interval_seconds))


@dataclass(frozen=True, slots=True)
class BacklogSample:
    """What one successful cycle left: when it ended (seconds, on any one clock), the
    backlog it counted (up to the cap), and how many slots it expired."""

    at: float
    backlog: int
    expired: int

    @property
    def capped(self) -> bool:
        return self.backlog >= BACKLOG_COUNT_CAP


def backlog_change(run: Sequence[BacklogSample], window: timedelta) -> int | None:
    """How the backlog changed over `window` across `run`, consecutive successful cycles,
    oldest first; None when the run holds fewer than two (nothing to compare)."""
    if len(run) < 2:  # a change needs two counts
        return None
    latest = run[-1]
    span = window.total_seconds()
    start = next(
        (index for index in range(len(run) - 2, -1, -1) if latest.at - run[index].at >= span),
        0,
    )
    reference = run[start]
    if latest.capped and reference.capped:
        return -sum(sample.expired for sample in run[start + 1 :])
    return latest.backlog - reference.backlog


def keep_for(run: list[BacklogSample], window: timedelta) -> list[BacklogSample]:
    """The part of a growing run that later changes can still read: every sample within
    `window` of the latest, and the latest one older than that."""
    if not run:
        return run
    span = window.total_seconds()
    latest = run[-1]
    older = [index for index, sample in enumerate(run) if latest.at - sample.at >= span]
    return run[older[-1] :] if older else run
