"""Reading a process's resident memory from /proc/<pid>/status."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from benchmarks.memory import parse_status, resident

STATUS = """Name:\tpython3
VmPeak:\t  300000 kB
VmHWM:\t   97656 kB
VmRSS:\t   48828 kB
Threads:\t1
"""


def test_rss_and_its_peak_are_read_in_megabytes() -> None:
    memory = parse_status(STATUS)

    assert memory.rss_mb == pytest.approx(48828 * 1024 / 1e6)
    assert memory.peak_mb == pytest.approx(97656 * 1024 / 1e6)


def test_a_status_without_resident_memory_is_refused() -> None:
    # A zombie's status has no Vm* lines.
    with pytest.raises(ValueError, match="VmRSS"):
        parse_status("Name:\tpython3\nState:\tZ (zombie)\n")


def test_the_memory_of_this_very_process_is_read_from_proc(tmp_path: Path) -> None:
    memory = resident(os.getpid())

    assert 0 < memory.rss_mb <= memory.peak_mb
