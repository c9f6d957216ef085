"""Worker processes as an operator starts them: `slot-expiration once` or `run`.

Each runs this package's command line in a Python of its own, with none of the
SLOT_EXPIRATION_* variables of the benchmark's environment (every option is a
flag), its JSON log lines on stderr collected as they come.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from datetime import datetime
from typing import Any

from benchmarks.context import BenchError
from slot_expiration.options import ENV_PREFIX

# Where PostgreSQL's binaries are: not a worker option, kept.
_KEPT_VARIABLES = frozenset({f"{ENV_PREFIX}PG_BINDIR"})
WAIT_SECONDS = 600.0
_POLL_SECONDS = 0.02


def worker_env() -> dict[str, str]:
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(ENV_PREFIX) or name in _KEPT_VARIABLES
    }


def log_event(line: str) -> dict[str, Any] | None:
    """A stderr line as a log record, or None if it is not one (a fatal error line)."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) and "event" in record else None


def event_time(record: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(record["timestamp"]))


class WorkerProcess:
    """A started worker command; its output is read line by line while it runs."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None and process.stderr is not None  # noqa: PT018
        self.process = process
        self.stdout_lines: list[str] = []
        self.stderr_lines: list[str] = []
        self._readers = (
            asyncio.create_task(_collect(process.stdout, self.stdout_lines)),
            asyncio.create_task(_collect(process.stderr, self.stderr_lines)),
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        records = (log_event(line) for line in list(self.stderr_lines))
        return [r for r in records if r is not None and (name is None or r["event"] == name)]

    async def wait(self, timeout_seconds: float = WAIT_SECONDS) -> None:
        """Wait for a successful exit; anything else is the run's failure."""
        try:
            async with asyncio.timeout(timeout_seconds):
                code = await self.process.wait()
                await asyncio.gather(*self._readers)
        except TimeoutError:
            raise BenchError(f"a worker process ran longer than {timeout_seconds:g} s") from None
        if code != 0:
            last = self.stderr_lines[-1] if self.stderr_lines else f"exit status {code}"
            raise BenchError(f"a worker process failed (exit {code}): {last}")

    async def until(
        self, condition: Callable[[], bool], what: str, timeout_seconds: float = WAIT_SECONDS
    ) -> None:
        """Poll the collected output until `condition` holds (the process must still run)."""
        async with asyncio.timeout(timeout_seconds):
            while not condition():
                if self.process.returncode is not None:
                    await asyncio.gather(*self._readers)
                    if condition():
                        return
                    last = self.stderr_lines[-1] if self.stderr_lines else "no output"
                    raise BenchError(f"a worker exited before {what}: {last}")
                await asyncio.sleep(_POLL_SECONDS)

    def terminate(self) -> None:
        with suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)

    async def close(self) -> None:
        """Kill it if it still runs; stop reading."""
        if self.process.returncode is None:
            with suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()
        for reader in self._readers:
            reader.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)


async def _collect(stream: asyncio.StreamReader, sink: list[str]) -> None:
    async for raw in stream:
        sink.append(raw.decode(errors="replace").rstrip("\n"))


@asynccontextmanager
async def worker_process(*args: str) -> AsyncIterator[WorkerProcess]:
    """`slot-expiration <args>` in a subprocess that does not outlive the block."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "slot_expiration",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=worker_env(),
    )
    worker = WorkerProcess(process)
    try:
        yield worker
    finally:
        await worker.close()


def once_summary(worker: WorkerProcess) -> dict[str, Any]:
    """The JSON object `once --json` printed."""
    for line in reversed(worker.stdout_lines):
        with suppress(json.JSONDecodeError):
            summary = json.loads(line)
            if isinstance(summary, dict):
                return summary
    raise BenchError("a worker printed no result")
