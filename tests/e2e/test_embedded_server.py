"""The embedded server never outlives the process that started it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

HOST = """
import sys
from slot_expiration.embedded import EmbeddedPostgres
server = EmbeddedPostgres().start()
print(server.data_dir, flush=True)
sys.stdin.read()
"""


def servers_for(data_dir: str) -> list[int]:
    """Pids of processes whose command line names this data folder."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if data_dir in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_server_stops_when_its_host_process_dies(how: signal.Signals) -> None:
    data_dir = ""
    host = subprocess.Popen(
        [sys.executable, "-c", HOST], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert host.stdout is not None
        data_dir = host.stdout.readline().strip()
        assert servers_for(data_dir), "the server should be running while its host lives"

        os.kill(host.pid, how)
        host.wait(timeout=30)

        deadline = time.monotonic() + 30
        while servers_for(data_dir) and time.monotonic() < deadline:
            time.sleep(0.05)  # polling the process table, bounded by the deadline
        assert servers_for(data_dir) == []
    finally:
        host.kill()
        host.wait(timeout=30)
        if data_dir:  # a killed host could not remove its folder: the test does
            shutil.rmtree(Path(data_dir).parent, ignore_errors=True)
