"""Servers a fault test owns and breaks: a PostgreSQL it stops and starts again, a hot
standby made with pg_basebackup, and pgbouncer in transaction mode in front of a server.

PostgreSQL and pgbouncer both refuse to run as root; as root they run as the
`postgres` account, in folders of their own that this module removes again.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psycopg

from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.embedded.postgres import find_bindir, free_port

SERVER_ACCOUNT = "postgres"
READY_TIMEOUT_SECONDS = 30.0
ORPHANS_TIMEOUT_SECONDS = 30.0


def children_of(pid: int) -> list[int]:
    """The processes whose parent is `pid` now (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Running, and not a zombie (an exited child not reaped yet by its new parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


class ControlledServer:
    """An embedded server of the test's own that it may stop (fast or immediate) and
    start again on the same data folder and port."""

    def __init__(self, server: EmbeddedPostgres) -> None:
        self.server = server
        self.running = True

    def stop(self, mode: str) -> None:
        self.server.stop(mode)
        self.running = False

    def kill(self) -> None:
        """SIGKILL the postmaster alone, as the kernel's OOM killer would: its children
        notice by themselves and exit (the worker's backend may still finish the
        statement in flight). The server can start again once the last of them is gone;
        one still there after ORPHANS_TIMEOUT_SECONDS is killed too."""
        postmaster = self.postmaster_pid()
        children = children_of(postmaster)
        os.kill(postmaster, signal.SIGKILL)
        deadline = time.monotonic() + ORPHANS_TIMEOUT_SECONDS
        while (left := [pid for pid in children if _alive(pid)]) and time.monotonic() < deadline:
            time.sleep(0.02)  # orphans have no event to wait on: polling the process table
        for pid in left:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.server.stop("immediate")  # reaps what started the postmaster; nothing left to stop
        self.running = False

    def postmaster_pid(self) -> int:
        """The first line of the data folder's postmaster.pid."""
        return int((self.server.data_dir / "postmaster.pid").read_text().split()[0])

    def start(self) -> None:
        if not self.running:
            self.server.start()
            self.running = True

    def url_for(self, database: str) -> str:
        return self.server.url_for(database)


def _account() -> pwd.struct_passwd | None:
    return pwd.getpwnam(SERVER_ACCOUNT) if os.geteuid() == 0 else None


def _own_folder(prefix: str) -> Path:
    """A temporary folder the server account can write to."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    if (account := _account()) is not None:
        os.chown(root, account.pw_uid, account.pw_gid)
    return root


def _as_server_account(argv: list[str]) -> list[str]:
    account = _account()
    return argv if account is None else ["runuser", "-u", account.pw_name, "--", *argv]


def version_of(program: str) -> str:
    """`postgres --version` / `pgbouncer --version`, first line, for the report."""
    path = str(find_bindir() / program) if program == "postgres" else program
    done = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.splitlines()[0].strip() if done.stdout else "unknown"


@contextmanager
def hot_standby(primary: EmbeddedPostgres) -> Iterator[EmbeddedPostgres]:
    """A streaming replica of `primary` (pg_basebackup -R), read-only until promoted."""
    root = _own_folder("slot-expiration-standby-")
    try:
        backup = [
            str(find_bindir() / "pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            "postgres",
            "-D",
            str(root / "data"),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
        ]
        done = subprocess.run(
            _as_server_account(backup), capture_output=True, text=True, check=False, cwd=root
        )
        assert done.returncode == 0, f"pg_basebackup failed: {done.stderr}"
        with EmbeddedPostgres(data_root=root) as standby:
            yield standby
    finally:
        shutil.rmtree(root, ignore_errors=True)


def promote(server: EmbeddedPostgres) -> None:
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute("SELECT pg_promote()")  # waits until the promotion is done


def in_recovery(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        assert row is not None
        return bool(row[0])


@dataclass(frozen=True, slots=True)
class Bouncer:
    port: int
    log_file: Path

    def url_for(self, database_url: str) -> str:
        """The same database, through the pooler."""
        database = database_url.rsplit("/", 1)[1]
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])


def _bouncer_config(  # noqa: PLR0917 - one private caller, each argument one setting
    root: Path, port: int, target_port: int, pool_size: int, pool_mode: str, drops_options: bool
) -> Path:
    (root / "userlist.txt").write_text('"postgres" ""\n')
    config = root / "pgbouncer.ini"
    config.write_text(
        "\n".join(
            [
                "[databases]",
                f"* = host=127.0.0.1 port={target_port}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {root / 'userlist.txt'}",
                f"pool_mode = {pool_mode}",
                # A client's `options` (libpq's startup parameter): refused by default;
                # many deployments let pgbouncer accept and drop them instead.
                *(["ignore_startup_parameters = options"] if drops_options else []),
                f"default_pool_size = {pool_size}",
                "max_client_conn = 200",
                "admin_users = postgres",
                "",
            ]
        )
    )
    return config


@contextmanager
def pgbouncer(
    target_port: int,
    pool_size: int = 2,
    *,
    pool_mode: str = "transaction",
    drops_options: bool = False,
) -> Iterator[Bouncer]:
    """Debian's pgbouncer in `pool_mode` in front of 127.0.0.1:`target_port`; with
    `drops_options`, it accepts a client's `options` and never passes them on."""
    root = _own_folder("slot-expiration-pgbouncer-")
    port = free_port()
    config = _bouncer_config(root, port, target_port, pool_size, pool_mode, drops_options)
    log_file = root / "pgbouncer.log"
    account = _account()
    with log_file.open("ab") as log:
        process = subprocess.Popen(
            ["pgbouncer", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            user=account.pw_uid if account else None,
            group=account.pw_gid if account else None,
            extra_groups=[] if account else None,
        )
    bouncer = Bouncer(port=port, log_file=log_file)
    try:
        _wait_for_bouncer(process, bouncer)
        yield bouncer
    finally:
        _stop(process)
        shutil.rmtree(root, ignore_errors=True)


def _wait_for_bouncer(process: subprocess.Popen[bytes], bouncer: Bouncer) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    admin = f"postgresql://postgres@127.0.0.1:{bouncer.port}/pgbouncer"
    while True:
        if process.poll() is not None:
            raise AssertionError(f"pgbouncer exited at start: {bouncer.log_tail()}")
        try:
            with psycopg.connect(admin, autocommit=True, connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.05)  # polling the pooler's readiness: it has no other signal


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)  # pgbouncer's immediate shutdown
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
