"""docs/deploy.md states what the kit really holds: the paths it lists exist, the numbers it
quotes are the manifests' and the unit's, the security rating is the one systemd-analyze gives,
and the README links it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.deploy

REPOSITORY = Path(__file__).resolve().parents[2]
GUIDE = REPOSITORY / "docs" / "deploy.md"
UNIT = REPOSITORY / "deploy" / "systemd" / "slot-expiration.service"


def _guide() -> str:
    return GUIDE.read_text(encoding="utf-8")


def test_every_path_the_guide_lists_exists() -> None:
    listed = re.findall(r"^\| `([^`]+)`", _guide(), flags=re.MULTILINE)

    assert listed
    for entry in listed:
        assert (REPOSITORY / entry).exists(), entry


def test_the_guide_quotes_the_grace_period_and_stop_timeout_in_force() -> None:
    deployment = yaml.safe_load((REPOSITORY / "deploy/kubernetes/base/deployment.yaml").read_text())
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    (stop,) = re.findall(r"^TimeoutStopSec=(\d+)s$", UNIT.read_text(), flags=re.MULTILINE)

    assert f"**`terminationGracePeriodSeconds: {grace}`**" in _guide()
    assert f"`TimeoutStopSec={stop}s`" in _guide()


def test_the_guide_quotes_the_rating_systemd_analyze_gives() -> None:
    binary = shutil.which("systemd-analyze")
    assert binary is not None, "systemd-analyze is missing: ./scripts/test installs it (systemd)"
    done = subprocess.run(
        [binary, "security", "--offline=true", "--no-pager", str(UNIT)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    rating = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", done.stdout)

    assert rating is not None, done.stdout + done.stderr
    assert f"rates **{rating.group(1)}**" in _guide()


def test_the_guide_quotes_the_memory_requests_and_limits_in_force() -> None:
    deployment = yaml.safe_load((REPOSITORY / "deploy/kubernetes/base/deployment.yaml").read_text())
    resources = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]

    quoted = (
        f"requests {resources['requests']['memory']} and limits {resources['limits']['memory']}"
    )
    assert quoted in _guide()


def test_the_readme_links_the_guide_and_the_changelog() -> None:
    readme = (REPOSITORY / "README.md").read_text(encoding="utf-8")

    assert "(docs/deploy.md)" in readme
    assert "(CHANGELOG.md)" in readme
