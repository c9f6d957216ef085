"""deploy/systemd/slot-expiration.service: `systemd-analyze verify` has nothing to say about it,
`systemd-analyze security --offline=true` rates it 2.0 or lower, it stops the worker the way
the worker stops gracefully, and the worker runs under its memory restriction."""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.timing import worst_graceful_stop_seconds
from tests.e2e.command import Running, clean_env
from tests.e2e.endpoint import endpoint_url, get, get_json, sample

pytestmark = pytest.mark.deploy

REPOSITORY = Path(__file__).resolve().parents[2]
UNIT = REPOSITORY / "deploy" / "systemd" / "slot-expiration.service"
ENV_EXAMPLE = REPOSITORY / "deploy" / "systemd" / "slot-expiration.env.example"
INSTALLED_PROGRAM = "/opt/slot-expiration/bin/slot-expiration"
PROGRAM = Path(sys.executable).parent / "slot-expiration"
MAX_EXPOSURE = 2.0


def _systemd_analyze(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("systemd-analyze")
    assert binary is not None, "systemd-analyze is missing: ./scripts/test installs it (systemd)"
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=60, check=False)


def _settings(text: str) -> dict[str, dict[str, list[str]]]:
    """Each section's settings; a key may be given more than once."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def _with_this_venvs_program(directory: Path, text: str) -> Path:
    """A copy of the unit whose ExecStart names this test environment's slot-expiration:
    verify checks that the program exists, and /opt/slot-expiration is not installed here."""
    assert f"ExecStart={INSTALLED_PROGRAM} run" in text
    copy = directory / UNIT.name
    copy.write_text(text.replace(f"ExecStart={INSTALLED_PROGRAM}", f"ExecStart={PROGRAM}"))
    return copy


def test_systemd_analyze_verify_has_nothing_to_report(tmp_path: Path) -> None:
    unit = _with_this_venvs_program(tmp_path, UNIT.read_text(encoding="utf-8"))

    done = _systemd_analyze("verify", "--man=no", str(unit))

    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_systemd_analyze_verify_reports_a_misspelt_setting(tmp_path: Path) -> None:
    text = UNIT.read_text(encoding="utf-8").replace("Restart=on-failure", "Restart=on-failur")
    unit = _with_this_venvs_program(tmp_path, text)

    done = _systemd_analyze("verify", "--man=no", str(unit))

    assert "Failed to parse service restart specifier" in done.stderr


def test_systemd_analyze_security_rates_the_unit_2_0_or_lower() -> None:
    threshold = f"--threshold={int(MAX_EXPOSURE * 10)}"  # in tenths

    done = _systemd_analyze("security", "--offline=true", threshold, "--no-pager", str(UNIT))

    exposure = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", done.stdout)
    assert exposure is not None, done.stdout + done.stderr
    assert float(exposure.group(1)) <= MAX_EXPOSURE, done.stdout
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_unit_restarts_on_failure_and_outwaits_a_graceful_stop() -> None:
    service = _settings(UNIT.read_text(encoding="utf-8"))["Service"]

    assert service["ExecStart"] == [f"{INSTALLED_PROGRAM} run"]
    assert service["Restart"] == ["on-failure"]
    assert service["KillSignal"] == ["SIGTERM"]
    (timeout,) = service["TimeoutStopSec"]
    assert int(timeout.removesuffix("s")) > worst_graceful_stop_seconds()
    assert service["DynamicUser"] == ["yes"]
    assert service["EnvironmentFile"] == ["/etc/slot-expiration/slot-expiration.env"]


def test_the_environment_example_keeps_the_password_out_of_the_url() -> None:
    text = ENV_EXAMPLE.read_text(encoding="utf-8")
    variables = dict(
        line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")
    )

    assert variables["SLOT_EXPIRATION_DATABASE_URL"] == "postgresql://"
    assert {"PGHOST", "PGDATABASE", "PGUSER", "PGPASSWORD"} <= set(variables)
    assert "mode 0600" in text
    assert "install -m 0600" in text


async def test_the_worker_runs_and_serves_with_writable_executable_memory_denied(
    database_url: str,
) -> None:
    """MemoryDenyWriteExecute=yes, through the kernel's own per-process switch (PR_SET_MDWE,
    kept across exec): `run`, its compiled dependencies and its endpoint never need memory
    that is both writable and executable."""
    refuse_exec_gain = (
        "import ctypes, os, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "assert libc.prctl(65, 1, 0, 0, 0) == 0, ctypes.get_errno()  # PR_SET_MDWE\n"
        "os.execv(sys.argv[1], sys.argv[1:])\n"
    )
    args = ("run", "--interval-seconds", "3600", "--database-url", database_url)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        refuse_exec_gain,
        str(PROGRAM),
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=clean_env(),
    )
    worker = Running((PROGRAM.name, *args), process)
    try:
        base = await endpoint_url(worker)
        await worker.until(lambda: worker.logged("cycle.completed"), "a cycle completed")
        metrics_status, exposition = await get(f"{base}/metrics")
        ready_status, _ = await get_json(f"{base}/readyz")
        worker.send_signal(signal.SIGTERM)
        done = await worker.wait()
    finally:
        await worker.stop()

    assert (metrics_status, ready_status) == (200, 200)
    assert sample(exposition, "calendar_slot_expiration_cycles_total", outcome="success") == 1
    assert done.returncode == 0, done.describe()
