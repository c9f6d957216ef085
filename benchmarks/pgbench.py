"""Driving PostgreSQL's own load tool, pgbench, and reading its per-transaction log.

The booking load comes from a client nobody here wrote: pgbench, from the
server's binaries, runs a script of named statements at a fixed rate: pick a
random candidate slot (its columns become pgbench variables through \\gset),
then book it; the other parameters are pgbench variables set on its command
line. Our statements' `%(name)s` parameters become pgbench's `:name`
variables, sent as bind parameters (`-M prepared`), never spliced into text.
With `--rate`, pgbench measures each transaction from its scheduled start, so
a transaction delayed behind a slow one counts its wait (no coordinated omission).
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.context import BenchError
from slot_expiration.embedded import find_bindir

_PARAMETER = re.compile(r"%\((?P<name>[a-z_][a-z0-9_]*)\)s")
_OK_STATUSES = frozenset({"ok"})
_LOG_NAME = "bookings"


@dataclass(frozen=True, slots=True)
class PgbenchSettings:
    seconds: float
    rate_per_second: int
    clients: int
    variables: Mapping[str, str] = field(default_factory=dict)  # --define NAME=VALUE


@dataclass(frozen=True, slots=True)
class LoggedTransaction:
    """One line of pgbench's --log: a transaction and when it ended."""

    client: int
    status: str  # "ok", or pgbench's word for it: "skipped", "failed", "serialization", ...
    latency_ms: float | None  # from its scheduled start (with --rate) to its end
    ended_at: float  # Unix time, seconds
    lag_ms: float | None  # how late it started after its schedule (with --rate)

    @property
    def ok(self) -> bool:
        return self.status in _OK_STATUSES


def pgbench_statement(statement: str) -> str:
    """A named statement with pgbench variables (`:name`) for its `%(name)s` parameters."""
    if "%" in _PARAMETER.sub("", statement):
        raise ValueError("statement has a parameter pgbench cannot take")
    return _PARAMETER.sub(lambda match: f":{match['name']}", statement)


def booking_script(statements: Sequence[str], candidates: int) -> str:
    """The pgbench script: a random row number, the first statement's columns into
    variables (\\gset), then the other statements."""
    if candidates < 1:
        raise ValueError("no candidate slots to book")
    pick, *rest = (pgbench_statement(s).rstrip().rstrip(";") for s in statements)
    lines = [f"\\set n random(1, {candidates})", f"{pick} \\gset", *(f"{s};" for s in rest)]
    return "\n".join(lines) + "\n"


def parse_log_line(line: str) -> LoggedTransaction:
    """`client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]`."""
    fields = line.split()
    if len(fields) < 6:
        raise ValueError(f"not a pgbench log line: {line!r}")
    client, _, latency, _, epoch, micros, *extra = fields
    status, latency_ms = ("ok", int(latency) / 1000.0) if latency.isdigit() else (latency, None)
    lag_ms = int(extra[0]) / 1000.0 if extra and extra[0].lstrip("-").isdigit() else None
    return LoggedTransaction(
        client=int(client),
        status=status,
        latency_ms=latency_ms,
        ended_at=int(epoch) + int(micros) / 1_000_000,
        lag_ms=lag_ms,
    )


def parse_log(lines: Iterable[str]) -> list[LoggedTransaction]:
    return [parse_log_line(line) for line in lines if line.strip()]


def between(
    transactions: Sequence[LoggedTransaction], start: float, end: float
) -> list[LoggedTransaction]:
    """The transactions that ended within [start, end] (Unix time)."""
    return [t for t in transactions if start <= t.ended_at <= end]


def pgbench_argv(
    binary: Path,
    url: str,
    script: Path,
    settings: PgbenchSettings,
    log_prefix: Path,
) -> list[str]:
    defines = [f"--define={name}={value}" for name, value in settings.variables.items()]
    return [
        str(binary),
        "--no-vacuum",
        "--protocol=prepared",
        f"--client={settings.clients}",
        "--jobs=1",
        f"--rate={settings.rate_per_second}",
        f"--time={max(1, round(settings.seconds))}",
        "--log",
        f"--log-prefix={log_prefix}",
        f"--file={script}",
        *defines,
        url,
    ]


def pgbench_binary() -> Path:
    binary = find_bindir() / "pgbench"
    if not binary.is_file():
        raise BenchError(f"pgbench not found beside the server binaries ({binary})")
    return binary


async def run_pgbench(url: str, script: str, settings: PgbenchSettings) -> list[LoggedTransaction]:
    """Run pgbench with this script to its end; every transaction it logged."""
    with tempfile.TemporaryDirectory(prefix="slot-expiration-pgbench-") as name:
        folder = Path(name)
        script_path = _write_script(folder, script)
        argv = pgbench_argv(pgbench_binary(), url, script_path, settings, folder / _LOG_NAME)
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=folder,
        )
        try:
            _, err = await process.communicate()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        if process.returncode != 0:
            raise BenchError(f"pgbench failed (exit {process.returncode}): {_last_line(err)}")
        return parse_log(_read_logs(folder))


def _write_script(folder: Path, script: str) -> Path:
    path = folder / "booking.sql"
    path.write_text(script, encoding="utf-8")
    return path


def _read_logs(folder: Path) -> list[str]:
    """pgbench writes one log per thread: <prefix>.<pid>[.<thread>]."""
    logs = sorted(folder.glob(f"{_LOG_NAME}.*"))
    return [line for log in logs for line in log.read_text(encoding="utf-8").splitlines()]


def _last_line(output: bytes) -> str:
    lines = [line for line in output.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
