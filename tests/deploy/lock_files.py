"""The hashed lock files in requirements/ (written by ./scripts/lock), read offline.

A lock file is pip's requirements format as `uv pip compile --generate-hashes` writes it:
`name==version ; marker` with `--hash=sha256:...` options, continued over lines with a
backslash, comments after `#`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

REPOSITORY = Path(__file__).resolve().parents[2]
PYPROJECT = REPOSITORY / "pyproject.toml"
REQUIREMENTS = REPOSITORY / "requirements"
RUNTIME_LOCK = REQUIREMENTS / "runtime.txt"
DEV_LOCK = REQUIREMENTS / "dev.txt"
BUILD_LOCK = REQUIREMENTS / "build.txt"
LOCK_COMMAND = "./scripts/lock"


@dataclass(frozen=True, slots=True)
class Pin:
    name: NormalizedName
    version: Version
    marker: Marker | None
    hashes: tuple[str, ...]

    def applies(self) -> bool:
        """Whether pip installs this pin on this machine."""
        return self.marker is None or self.marker.evaluate()


def read_lock(path: Path) -> dict[NormalizedName, Pin]:
    pins: dict[NormalizedName, Pin] = {}
    for line in _logical_lines(path.read_text(encoding="utf-8")):
        words = line.split()
        hashes = tuple(w.removeprefix("--hash=") for w in words if w.startswith("--hash="))
        requirement = Requirement(" ".join(w for w in words if not w.startswith("--hash=")))
        specifiers = list(requirement.specifier)
        if len(specifiers) != 1 or specifiers[0].operator != "==":
            raise ValueError(f"{path.name}: {requirement} is not pinned with ==")
        name = canonicalize_name(requirement.name)
        if name in pins:
            raise ValueError(f"{path.name}: {name} is pinned twice")
        pins[name] = Pin(name, Version(specifiers[0].version), requirement.marker, hashes)
    return pins


def _logical_lines(text: str) -> Iterable[str]:
    pending = ""
    for raw in text.splitlines():
        if raw.lstrip().startswith("#"):
            continue
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        pending += line
        if pending.strip():
            yield pending.strip()
        pending = ""
    if pending.strip():
        yield pending.strip()


def pyproject() -> dict[str, Any]:
    with PYPROJECT.open("rb") as file:
        return tomllib.load(file)


def project_requirements(*extras: str) -> list[Requirement]:
    """The package's own dependencies, plus those of the named extras."""
    project = pyproject()["project"]
    listed = list(project["dependencies"])
    for extra in extras:
        listed += project["optional-dependencies"][extra]
    return [Requirement(text) for text in listed]


def build_requirements() -> list[Requirement]:
    return [Requirement(text) for text in pyproject()["build-system"]["requires"]]


def unmet(
    requirements: Iterable[Requirement], pins: Mapping[NormalizedName, Pin]
) -> tuple[set[NormalizedName], list[str]]:
    """Follow `requirements` through the pins: each one, its extras' requirements and, from
    the installed metadata, each pinned package's own requirements (as far as they apply on
    this machine). Returns the packages reached and what the pins fail to satisfy."""
    failures: list[str] = []
    reached: set[NormalizedName] = set()
    queue: list[tuple[Requirement, str]] = [(r, "pyproject.toml") for r in requirements]
    seen_extras: set[tuple[NormalizedName, str]] = set()
    while queue:
        requirement, wanted_by = queue.pop()
        name = canonicalize_name(requirement.name)
        pin = pins.get(name)
        if pin is None:
            failures.append(f"{requirement} (wanted by {wanted_by}) is not in the lock")
            continue
        if not requirement.specifier.contains(pin.version, prereleases=True):
            failures.append(f"{requirement} (wanted by {wanted_by}) is pinned at {pin.version}")
            continue
        first = name not in reached
        wanted = [extra for extra in sorted(requirement.extras) if (name, extra) not in seen_extras]
        if not first and not wanted:
            continue
        reached.add(name)
        seen_extras.update((name, extra) for extra in wanted)
        for needed in _requirements_of(name, pin.version, wanted, first=first):
            queue.append((needed, f"{name}=={pin.version}"))
    return reached, failures


def _requirements_of(
    name: NormalizedName, version: Version, extras: list[str], *, first: bool
) -> list[Requirement]:
    """What the installed `name` requires (only its extras' part unless `first`)."""
    distribution = metadata.distribution(name)
    installed = Version(distribution.version)
    if installed != version:
        raise AssertionError(f"{name} {installed} is installed, the lock pins {version}")
    found: list[Requirement] = []
    for text in distribution.requires or []:
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None or marker.evaluate({"extra": ""}):
            if first:  # needed without any extra
                found.append(requirement)
        elif any(marker.evaluate({"extra": extra}) for extra in extras):
            found.append(requirement)
    return found
