"""A private PostgreSQL server in a data folder of its own, for the demo and the tests.

It uses the PostgreSQL binaries on the machine (SLOT_EXPIRATION_PG_BINDIR,
`pg_config --bindir`, or Debian's /usr/lib/postgresql/<version>/bin). PostgreSQL
refuses to run as root, so under root the server runs as the unprivileged
`postgres` system account (which Debian's package creates).
"""

from __future__ import annotations

import ctypes
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

BINDIR_VARIABLE = "SLOT_EXPIRATION_PG_BINDIR"
SERVER_ACCOUNT = "postgres"
_DEBIAN_BINDIRS = Path("/usr/lib/postgresql")
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
# Throwaway data: durability settings off make the tests several times faster.
FAST_UNSAFE = ("fsync=off", "synchronous_commit=off", "full_page_writes=off")


class EmbeddedPostgresError(RuntimeError):
    """The private server could not be found, started or stopped."""


def find_bindir() -> Path:
    """Where initdb, pg_ctl and postgres live."""
    candidates: list[Path] = []
    if explicit := os.environ.get(BINDIR_VARIABLE):
        candidates.append(Path(explicit))
    if pg_config := shutil.which("pg_config"):
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        candidates.append(Path(out.stdout.strip()))
    if _DEBIAN_BINDIRS.is_dir():
        versions = sorted(_DEBIAN_BINDIRS.iterdir(), key=_version_key, reverse=True)
        candidates.extend(version / "bin" for version in versions)
    for candidate in candidates:
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            return candidate
    raise EmbeddedPostgresError(
        "no PostgreSQL server binaries found (initdb, pg_ctl): install them "
        f"(apt-get install postgresql) or set {BINDIR_VARIABLE}"
    )


def _version_key(path: Path) -> tuple[int, str]:
    return (int(path.name), path.name) if path.name.isdigit() else (-1, path.name)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class EmbeddedPostgres:
    """Start with `start()` (or `with`), stop with `stop()`; the data folder is removed.

    `settings` are the server's own (`name=value`), on top of listening on
    loopback only; the default trades durability for speed.
    """

    def __init__(
        self,
        data_root: Path | None = None,
        port: int | None = None,
        settings: Sequence[str] = FAST_UNSAFE,
    ) -> None:
        self._bindir = find_bindir()
        self._account = _server_account()
        self._owns_root = data_root is None
        self._root = data_root or Path(tempfile.mkdtemp(prefix="slot-expiration-pg-"))
        self.port = port or free_port()
        self.data_dir = self._root / "data"
        self.log_file = self._root / "server.log"
        self._settings = tuple(settings)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> Self:
        """Run the server as our child (so we reap it) and wait until it accepts connections.

        Interrupted or failed half-way (Ctrl-C during initdb, say), it leaves
        neither a server nor its data folder behind.
        """
        try:
            return self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> Self:
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        argv = self._as_server_account(
            [str(self._bindir / "postgres"), "-D", str(self.data_dir), *self._server_flags()]
        )
        with self.log_file.open("ab") as log:
            # A session of its own: a Ctrl-C meant for us must not reach the server first.
            self._process = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_terminate_with_parent,  # noqa: PLW1509 - no threads when it starts
            )
        self._wait_until_ready()
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server; mode "immediate" simulates a crash (no clean shutdown)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        try:
            self._pg_ctl("stop", "-w", "-t", "60", "-m", mode)
            process.wait(timeout=60)
        except (EmbeddedPostgresError, subprocess.TimeoutExpired):
            # Not up far enough for pg_ctl (no pid file yet): end the whole
            # process group, which holds the server and nothing else.
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)

    def close(self) -> None:
        """Stop the server and remove the data folder if this object created it."""
        try:
            self.stop()
        finally:
            if self._owns_root:
                shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _server_flags(self) -> list[str]:
        settings = [
            "listen_addresses=127.0.0.1",
            f"unix_socket_directories={self._root}",
            "max_connections=100",
            *self._settings,
        ]
        return ["-p", str(self.port), *(arg for s in settings for arg in ("-c", s))]

    def _wait_until_ready(self, timeout_seconds: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_seconds
        probe = [str(self._bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)]
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                raise EmbeddedPostgresError(f"postgres exited at start: {self._log_tail()}")
            if subprocess.run(probe, check=False).returncode == 0:
                return
            time.sleep(0.05)  # polling the server's own readiness probe
        self.stop("immediate")
        raise EmbeddedPostgresError(f"postgres not ready after {timeout_seconds:g} s")

    def _log_tail(self) -> str:
        lines = self.log_file.read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else f"see {self.log_file}"

    def _initdb(self) -> None:
        self._root.mkdir(parents=True, exist_ok=True)
        if self._account is not None:
            os.chown(self._root, self._account.pw_uid, self._account.pw_gid)
        self._run(
            "initdb",
            [
                "-D",
                str(self.data_dir),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
            ],
        )

    def _pg_ctl(self, *args: str) -> None:
        self._run("pg_ctl", ["-D", str(self.data_dir), *args])

    def _as_server_account(self, argv: list[str]) -> list[str]:
        if self._account is None:
            return argv
        return ["runuser", "-u", self._account.pw_name, "--", *argv]

    def _run(self, tool: str, args: list[str]) -> None:
        argv = self._as_server_account([str(self._bindir / tool), *args])
        done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=self._root)
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            reason = detail[-1] if detail else f"exit status {done.returncode}"
            raise EmbeddedPostgresError(f"{tool} failed: {reason} (server log: {self.log_file})")


def _server_account() -> pwd.struct_passwd | None:
    """The account the server runs as: ourselves, or `postgres` when we are root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_ACCOUNT)
    except KeyError:
        raise EmbeddedPostgresError(
            "running as root, and PostgreSQL refuses root: create the unprivileged "
            f"'{SERVER_ACCOUNT}' account (apt-get install postgresql creates it)"
        ) from None


def _terminate_with_parent() -> None:
    """In the child, before exec: if our process dies (even by SIGKILL), the server
    gets SIGTERM and shuts down instead of living on as an orphan (Linux only)."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
