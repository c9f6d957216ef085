"""How busy the CPUs are, from two readings of /proc/stat."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.machine import busy_share, cpu_busy, cpu_times

BEFORE = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\n"
AFTER = "cpu  250 0 100 900 50 0 0 0 0 0\ncpu0 125 0 50 450 25 0 0 0 0 0\n"


def test_busy_time_is_everything_but_idle_and_iowait() -> None:
    assert cpu_times(BEFORE) == (150, 1000)


def test_the_busy_share_is_busy_time_over_all_time_between_readings() -> None:
    # 200 of the 300 jiffies in between were busy.
    assert busy_share(cpu_times(BEFORE), cpu_times(AFTER)) == pytest.approx(2 / 3)


def test_no_time_between_readings_is_no_busy_share() -> None:
    assert busy_share((5, 10), (5, 10)) == 0.0


def test_a_text_that_is_not_proc_stat_is_refused() -> None:
    with pytest.raises(ValueError, match="/proc/stat"):
        cpu_times("intr 1 2 3\n")


async def test_the_busy_share_of_this_machine_lies_between_none_and_all() -> None:
    assert 0.0 <= await cpu_busy(0.05, Path("/proc/stat")) <= 1.0
