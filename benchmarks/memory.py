"""The resident memory of a process, as Linux reports it in /proc/<pid>/status."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

_BYTES_PER_KB = 1024  # /proc says "kB" and means KiB
_BYTES_PER_MB = 1_000_000


@dataclass(frozen=True, slots=True)
class Resident:
    rss_mb: float  # VmRSS: resident now, in MB (10^6 bytes)
    peak_mb: float  # VmHWM: the most it was ever resident


def parse_status(text: str) -> Resident:
    """VmRSS and VmHWM of a /proc/<pid>/status text, in MB."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in {"VmRSS", "VmHWM"}:
            number, unit = rest.split()
            if unit != "kB":
                raise ValueError(f"unexpected unit {unit!r} for {key}")
            values[key] = int(number) * _BYTES_PER_KB / _BYTES_PER_MB
    if len(values) != 2:
        raise ValueError("no VmRSS/VmHWM lines: not a live process's status")
    return Resident(rss_mb=values["VmRSS"], peak_mb=values["VmHWM"])


def resident(pid: int, proc: Path = Path("/proc")) -> Resident:
    return parse_status((proc / str(pid) / "status").read_text())
