"""How busy the machine is: the share of all CPUs' time spent working, from /proc/stat.

Taken before a run starts, it tells how much of the machine other people's
work was already using (the run's own processes are not started yet).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

_IDLE_FIELDS = (3, 4)  # idle, iowait (after the "cpu" label: user nice system idle iowait ...)


def cpu_times(stat_text: str) -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from the first line of /proc/stat."""
    first = stat_text.splitlines()[0].split()
    if first[0] != "cpu":
        raise ValueError("not a /proc/stat text")
    values = [int(v) for v in first[1:9]]  # guest times are counted in user already
    idle = sum(values[i] for i in _IDLE_FIELDS)
    return sum(values) - idle, sum(values)


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share (0..1) of CPU time spent busy between two readings."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else 0.0


def read_cpu_times(stat: Path = Path("/proc/stat")) -> tuple[int, int]:
    return cpu_times(stat.read_text())


async def cpu_busy(seconds: float, stat: Path = Path("/proc/stat")) -> float:
    before = read_cpu_times(stat)
    await asyncio.sleep(seconds)
    return busy_share(before, read_cpu_times(stat))
