"""Running Prometheus's promtool (Debian's `prometheus` package) from tests."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_SECONDS = 60
REPOSITORY = Path(__file__).resolve().parents[2]
ALERTS = REPOSITORY / "deploy" / "prometheus" / "alerts.yml"
ALERTS_TEST = REPOSITORY / "deploy" / "prometheus" / "alerts_test.yml"
# The same rules over days (a dead deployment keeps alerting), evaluated every 5 minutes.
ALERTS_TEST_DAYS = REPOSITORY / "deploy" / "prometheus" / "alerts_test_days.yml"
DASHBOARD = REPOSITORY / "deploy" / "grafana" / "calendar-overview.json"
RUNBOOK = REPOSITORY / "docs" / "runbooks" / "slot-expiration.md"
# Where the runbook is published: the placeholder that alerts.yml and the dashboard hold
# (README, "Alerts": one substitution puts another in both).
RUNBOOK_BASE = "https://runbooks.example.com/slot-expiration"


def runbook_anchors() -> set[str]:
    """GitHub's anchors of the runbook's headings."""
    headings = re.findall(r"^#+ (.+)$", RUNBOOK.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}


@dataclass(frozen=True, slots=True)
class Outcome:
    returncode: int
    output: str


def promtool(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> Outcome:
    binary = shutil.which("promtool")
    assert binary is not None, "promtool is missing: ./scripts/test installs it (prometheus)"
    done = subprocess.run(
        [binary, *args],
        input=stdin,
        capture_output=True,
        timeout=TIMEOUT_SECONDS,
        cwd=cwd,
        check=False,
    )
    output = (done.stdout + done.stderr).decode(errors="replace")
    return Outcome(done.returncode, output)
