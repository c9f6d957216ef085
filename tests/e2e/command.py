"""Running the real `slot-expiration` command in a subprocess, and watching it from outside.

Every process gets a deadline: a hang fails the test with the output seen so
far instead of blocking the suite. Waiting is always polling a condition
(a log line, a database state, a process table) under a deadline.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import resource
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

# What users run: the console script installed next to this interpreter.
PROGRAM = Path(sys.executable).parent / "slot-expiration"
# The benchmark, as ./scripts/bench runs it: from the repository, beside the installed worker.
REPOSITORY = Path(__file__).resolve().parents[2]
BENCH = (sys.executable, "-m", "benchmarks")
BENCH_ENV = {"PYTHONPATH": str(REPOSITORY)}
PASSWORD = "s3cretPW"  # noqa: S105 - a test password the server (trust auth) ignores
ENV_PREFIX = "SLOT_EXPIRATION_"
# Tells the embedded server where PostgreSQL's binaries are; not a worker option.
_KEPT_VARIABLES = frozenset({"SLOT_EXPIRATION_PG_BINDIR"})
COMMAND_TIMEOUT_SECONDS = 30.0
WAIT_TIMEOUT_SECONDS = 20.0
POLL_SECONDS = 0.05


# A worker under test serves its endpoint on a free port, never on the default 9464
# that a real worker (or another test run on the machine) may hold.
_TEST_DEFAULTS = {"SLOT_EXPIRATION_METRICS_ADDR": "127.0.0.1:0"}


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without stray SLOT_EXPIRATION_* and OTEL_* variables,
    plus the tests' defaults, plus `extra`."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith((ENV_PREFIX, "OTEL_")) or name in _KEPT_VARIABLES
    }
    env.update(_TEST_DEFAULTS)
    env.update(extra or {})
    return env


def with_password(url: str, user: str | None = None) -> str:
    """The same URL with a password (and optionally another user) in it."""
    parts = urlsplit(url)
    netloc = f"{user or parts.username}:{PASSWORD}@{parts.hostname}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def parse_log_lines(lines: list[str]) -> list[dict[str, Any]]:
    """Each stderr line as a JSON object; any other line fails the test."""
    events: list[dict[str, Any]] = []
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            raise AssertionError(f"stderr line is not JSON: {line!r}") from None
        assert isinstance(event, dict), f"stderr line is not a JSON object: {line!r}"
        events.append(event)
    return events


def event_names(events: list[dict[str, Any]]) -> list[str]:
    return [str(event.get("event")) for event in events]


@dataclass(frozen=True, slots=True)
class Finished:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return (
            f"{' '.join(self.args)} -> {self.returncode}\n"
            f"--- stdout\n{self.stdout}--- stderr\n{self.stderr}"
        )

    def log_events(self) -> list[dict[str, Any]]:
        return parse_log_lines(self.stderr.splitlines())


class Running:
    """A started command whose stdout and stderr are collected line by line as they come."""

    def __init__(self, args: tuple[str, ...], process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        assert process.stderr is not None
        self.args = args
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

    @property
    def exited(self) -> bool:
        return self.process.returncode is not None

    def send_signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    def log_events(self) -> list[dict[str, Any]]:
        return parse_log_lines(self.stderr_lines)

    def logged(self, event: str) -> bool:
        return any(f'"event": "{event}"' in line for line in self.stderr_lines)

    def printed(self, text: str) -> bool:
        return any(text in line for line in self.stdout_lines)

    def describe(self) -> str:
        out, err = "\n".join(self.stdout_lines), "\n".join(self.stderr_lines)
        return f"{' '.join(self.args)}\n--- stdout\n{out}\n--- stderr\n{err}"

    async def wait(self, timeout_seconds: float = COMMAND_TIMEOUT_SECONDS) -> Finished:
        """Wait for the exit (and the end of its output) within a deadline."""
        try:
            async with asyncio.timeout(timeout_seconds):
                returncode = await self.process.wait()
                await asyncio.gather(*self._readers)
        except TimeoutError:
            raise AssertionError(
                f"still running after {timeout_seconds:g} s: {self.describe()}"
            ) from None
        return Finished(
            args=self.args,
            returncode=returncode,
            stdout="".join(f"{line}\n" for line in self.stdout_lines),
            stderr="".join(f"{line}\n" for line in self.stderr_lines),
        )

    async def until(
        self,
        condition: Callable[[], bool | Awaitable[bool]],
        what: str,
        timeout_seconds: float = WAIT_TIMEOUT_SECONDS,
    ) -> None:
        """Poll `condition` while the command runs; fail early if it exits first."""
        await eventually(condition, what, timeout_seconds, alive=self)

    async def stop(self) -> None:
        """Kill it if it still runs (a test's cleanup, not a behaviour under test)."""
        if self.process.returncode is None:
            with suppress(ProcessLookupError):
                self.process.kill()
            with suppress(TimeoutError):
                async with asyncio.timeout(10):
                    await self.process.wait()
        for reader in self._readers:
            reader.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)


async def _collect(stream: asyncio.StreamReader, sink: list[str]) -> None:
    async for raw in stream:
        sink.append(raw.decode(errors="replace").rstrip("\n"))


def _sigint_as_a_terminal_sends_it() -> None:
    """In the child, before exec: SIGINT back to its default. A suite started in the
    background (`cmd &`, nohup) has SIGINT ignored, an ignored signal is inherited
    across exec, and Python then installs no KeyboardInterrupt for it: the tests
    that send SIGINT would test the shell's setting, not the command."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _child_setup(open_files: tuple[int, int] | None) -> Callable[[], None]:
    """What the child does before exec: SIGINT as a terminal sends it, and optionally
    a (soft, hard) limit on open files, as an operator's unit file would set it."""

    def setup() -> None:
        _sigint_as_a_terminal_sends_it()
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, open_files)

    return setup


# The longest line of a command's output a test reads (a JSON document is one line).
LINE_LIMIT_BYTES = 4 * 1024 * 1024


@asynccontextmanager
async def started(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    open_files: tuple[int, int] | None = None,
    prefix: tuple[str, ...] = (),
    program: tuple[str, ...] = (str(PROGRAM),),
) -> AsyncIterator[Running]:
    """Start `slot-expiration <args>` (or another `program`; behind `prefix`, a wrapper such
    as faketime); whatever happens, it does not outlive the block."""
    process = await asyncio.create_subprocess_exec(
        *prefix,
        *program,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=clean_env(env),
        cwd=cwd,
        preexec_fn=_child_setup(open_files),
        limit=LINE_LIMIT_BYTES,
    )
    running = Running((Path(program[-1]).name, *args), process)
    try:
        yield running
    finally:
        await running.stop()


async def run_command(
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout_seconds: float = COMMAND_TIMEOUT_SECONDS,
    prefix: tuple[str, ...] = (),
    program: tuple[str, ...] = (str(PROGRAM),),
) -> Finished:
    """Run `slot-expiration <args>` (or another `program`) to completion within a deadline."""
    async with started(*args, env=env, prefix=prefix, program=program) as command:
        return await command.wait(timeout_seconds)


async def eventually(
    condition: Callable[[], bool | Awaitable[bool]],
    what: str,
    timeout_seconds: float = WAIT_TIMEOUT_SECONDS,
    *,
    alive: Running | None = None,
    poll_seconds: float = POLL_SECONDS,
) -> None:
    """Poll a condition until it holds; fail with `what` at the deadline."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        outcome = condition()
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome:
            return
        if alive is not None and alive.exited:
            raise AssertionError(f"exited before {what}: {alive.describe()}")
        if time.monotonic() > deadline:
            detail = f": {alive.describe()}" if alive is not None else ""
            raise AssertionError(f"not {what} after {timeout_seconds:g} s{detail}")
        await asyncio.sleep(poll_seconds)


# --- the process table, for "no server is left behind" ---------------------------------


def process_args(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def parent_pid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    return int(stat.rpartition(")")[2].split()[1])


def open_files_limit(pid: int) -> tuple[int, int]:
    """(soft, hard) limit on open files of a running process, as /proc shows it."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError(f"no open files limit for process {pid}")


def open_descriptors(pid: int) -> int:
    """How many file descriptors a running process holds."""
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def all_pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def processes_mentioning(text: str) -> dict[int, list[str]]:
    """Live processes (zombies have no command line) with `text` in an argument."""
    found: dict[int, list[str]] = {}
    for pid in all_pids():
        args = process_args(pid)
        if args and any(text in arg for arg in args) and pid != os.getpid():
            found[pid] = args
    return found


def server_data_dir(args: list[str]) -> Path | None:
    """The data folder of a `postgres -D <dir>` command line (also behind runuser)."""
    if "-D" not in args[:-1]:
        return None
    # The server binary is an absolute path; initdb's and runuser's `postgres` are names.
    if not any(Path(arg).is_absolute() and Path(arg).name == "postgres" for arg in args):
        return None
    return Path(args[args.index("-D") + 1])


def child_server_data_dir(parent: int) -> Path | None:
    """The data folder of a PostgreSQL server that `parent` started, if any yet."""
    for pid in all_pids():
        args = process_args(pid) if parent_pid(pid) == parent else None
        if args and (data_dir := server_data_dir(args)) is not None:
            return data_dir
    return None


async def kill_servers_in(root: Path) -> None:
    """Cleanup after a failed test: stop any PostgreSQL still running from `root`."""
    for pid, args in processes_mentioning(str(root)).items():
        if server_data_dir(args) is not None and Path(args[0]).name == "postgres":
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGQUIT)  # the postmaster's immediate shutdown
    with suppress(AssertionError):
        await eventually(lambda: not processes_mentioning(str(root)), "servers gone", 10)
    for pid in processes_mentioning(str(root)):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# --- the database, seen from outside --------------------------------------------------


async def public_relations(url: str) -> set[tuple[str, str, int, int]]:
    """(name, kind, relfilenode, xmin) of every relation in schema public.

    Dropping and recreating anything changes its relfilenode and xmin, so two
    equal snapshots mean the schema was left alone.
    """
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT c.relname, c.relkind::text, c.relfilenode::bigint, c.xmin::text::bigint "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public'"
        )
        return {(r[0], r[1], int(r[2]), int(r[3])) for r in await cursor.fetchall()}
