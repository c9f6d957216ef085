"""One version number, pyproject.toml's: the package's __version__, the build info metric and
the changelog's latest release all show it (and `--version`: tests/e2e/test_installed.py)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

import slot_expiration
from slot_expiration.telemetry.metrics import Metrics

REPOSITORY = Path(__file__).resolve().parents[2]


def _pyproject_version() -> str:
    with (REPOSITORY / "pyproject.toml").open("rb") as file:
        return str(tomllib.load(file)["project"]["version"])


def test_the_package_version_is_the_one_in_pyproject() -> None:
    assert slot_expiration.__version__ == _pyproject_version()


def test_build_info_is_1_with_the_version_as_its_only_label() -> None:
    exposition = Metrics().exposition().decode()

    families = {f.name: f for f in text_string_to_metric_families(exposition)}
    info = families["calendar_slot_expiration_build_info"]
    assert info.type == "gauge"
    assert [(s.labels, s.value) for s in info.samples] == [({"version": _pyproject_version()}, 1.0)]


def test_the_changelog_latest_release_is_the_pyproject_version() -> None:
    changelog = (REPOSITORY / "CHANGELOG.md").read_text(encoding="utf-8")

    releases = re.findall(r"^## \[([^\]]+)\]", changelog, flags=re.MULTILINE)
    assert releases[0] == "Unreleased"
    assert releases[1] == _pyproject_version()
    assert re.search(
        rf"^## \[{re.escape(releases[1])}\] - \d{{4}}-\d{{2}}-\d{{2}}$", changelog, re.M
    )
