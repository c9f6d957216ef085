"""The backlog over the last hours as an inline SVG's geometry: no script, no library.

The page's template draws what this computes: a line through the points, the
alert's threshold when it is within the scale, and the labels of both axes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from slot_expiration.history.store import BacklogPoint, CycleRecord
from slot_expiration.status.check import BACKLOG_WARNING_ABOVE

WIDTH: Final = 720
HEIGHT: Final = 220
LEFT: Final = 56  # room for the y axis' labels
RIGHT: Final = 12
TOP: Final = 12
BOTTOM: Final = 28  # room for the x axis' labels


@dataclass(frozen=True, slots=True)
class Dot:
    x: float
    y: float
    label: str  # "12:05 UTC: 340 slots", the point's own tooltip


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True, slots=True)
class BacklogChart:
    dots: tuple[Dot, ...]
    ticks: tuple[Tick, ...]  # one per whole hour of the window, on the x axis
    top_value: int  # the y axis' highest value
    threshold_y: float | None  # the alert's line, when it is within the scale
    start_label: str
    end_label: str
    summary: str  # what the chart says, in words (its accessible description)

    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    top: int = TOP
    bottom_y: float = HEIGHT - BOTTOM
    right_x: float = WIDTH - RIGHT

    @property
    def polyline(self) -> str:
        return " ".join(f"{dot.x:.1f},{dot.y:.1f}" for dot in self.dots)

    @property
    def threshold(self) -> int:
        return BACKLOG_WARNING_ABOVE


def nice_ceiling(value: int) -> int:
    """The smallest of 1, 2 or 5 times a power of ten at or above `value` (at least 10)."""
    if value <= 10:
        return 10
    power: int = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return step * power
    raise AssertionError("unreachable: 10 x power always covers the value")


def backlog_chart(
    points: Sequence[BacklogPoint],
    start: datetime,
    end: datetime,
    latest: CycleRecord | None = None,
    bucket: timedelta = timedelta(minutes=3),
) -> BacklogChart:
    """The chart of `points` (each the largest backlog in its `bucket` of time) between
    `start` and `end` (the window the page shows); its words say what the `latest` cycle
    left."""
    highest = max((p.backlog for p in points), default=0)
    top_value = nice_ceiling(max(highest, 1))
    span = max((end - start).total_seconds(), 1.0)
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x_of(moment: datetime) -> float:
        return LEFT + plot_width * min(max((moment - start).total_seconds() / span, 0.0), 1.0)

    def y_of(value: int) -> float:
        return TOP + plot_height * (1 - value / top_value)

    dots = tuple(
        Dot(x_of(p.at), y_of(p.backlog), f"{_hm(p.at)}: {p.backlog} slots") for p in points
    )
    threshold_y = y_of(BACKLOG_WARNING_ABOVE) if top_value >= BACKLOG_WARNING_ABOVE else None
    hours = round((end - start) / timedelta(hours=1))
    return BacklogChart(
        dots=dots,
        ticks=tuple(Tick(x_of(hour), _hm(hour)) for hour in _whole_hours(start, end)),
        top_value=top_value,
        threshold_y=threshold_y,
        start_label=_hm(start),
        end_label=_hm(end),
        summary=_summary(points, hours, latest, bucket),
    )


def _summary(
    points: Sequence[BacklogPoint], hours: int, latest: CycleRecord | None, bucket: timedelta
) -> str:
    """The chart in words. A point is the largest backlog any cycle left in its few minutes
    (every instance counts the same backlog): what the latest cycle left is its own."""
    if latest is None:
        now = "No cycle has run yet."
    elif latest.backlog is None:
        now = f"The latest cycle ({_hm(latest.ended_at)}) could not count the backlog."
    else:
        now = f"The latest cycle ({_hm(latest.ended_at)}) left {latest.backlog}."
    if not points:
        return f"{now} No cycle recorded a backlog in the last {hours} hours."
    highest = max(points, key=lambda p: p.backlog)
    return (
        f"{now} Each point is the largest backlog a cycle left in its "
        f"{bucket.total_seconds() / 60:g} minutes; over the last {hours} hours at most "
        f"{highest.backlog} (at {_hm(highest.at)})."
    )


def _whole_hours(start: datetime, end: datetime) -> list[datetime]:
    """The whole hours inside the window, but for those so close to its ends (labelled
    apart) that their labels would overlap."""
    margin = (end - start) * 0.2
    hour = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    hours = []
    while hour < end - margin:
        if hour - start >= margin:
            hours.append(hour)
        hour += timedelta(hours=1)
    return hours


def _hm(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%H:%M} UTC"
