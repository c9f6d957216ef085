"""The lock files in requirements/ satisfy pyproject.toml, and the test environment was
installed from them. Offline: pyproject.toml's requirements are read with `packaging` and
followed through the pins, each package's own requirements taken from its installed metadata.

When one of these fails after a change of dependencies, run ./scripts/lock.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

from tests.deploy.lock_files import (
    BUILD_LOCK,
    DEV_LOCK,
    LOCK_COMMAND,
    REPOSITORY,
    RUNTIME_LOCK,
    Pin,
    build_requirements,
    project_requirements,
    read_lock,
    unmet,
)

pytestmark = pytest.mark.deploy

LOCKS = (RUNTIME_LOCK, DEV_LOCK, BUILD_LOCK)


@pytest.mark.parametrize("lock", LOCKS, ids=lambda path: path.name)
def test_every_locked_package_is_pinned_exactly_with_sha256_hashes(lock: Path) -> None:
    pins = read_lock(REPOSITORY / lock)

    assert pins
    unhashed = [str(pin.name) for pin in pins.values() if not pin.hashes]
    assert unhashed == []
    assert all(h.startswith("sha256:") for pin in pins.values() for h in pin.hashes)


@pytest.mark.parametrize("lock", LOCKS, ids=lambda path: path.name)
def test_each_lock_names_the_command_that_regenerates_it(lock: Path) -> None:
    header = (REPOSITORY / lock).read_text(encoding="utf-8").splitlines()[:2]

    assert header[1].strip() == f"#    {LOCK_COMMAND}"
    assert os.access(REPOSITORY / LOCK_COMMAND, os.X_OK)


def test_the_runtime_lock_satisfies_the_package_dependencies_extras_included() -> None:
    reached, failures = unmet(project_requirements(), read_lock(RUNTIME_LOCK))

    assert failures == []
    assert "psycopg-binary" in reached  # psycopg[binary]: the extra was followed


def test_the_dev_lock_satisfies_the_dependencies_and_the_dev_extra() -> None:
    reached, failures = unmet(project_requirements("dev"), read_lock(DEV_LOCK))

    assert failures == []
    assert {"pytest", "jsonschema", "psycopg-binary"} <= reached


def test_the_runtime_lock_holds_nothing_the_package_does_not_need_here_or_elsewhere() -> None:
    pins = read_lock(RUNTIME_LOCK)
    reached, _ = unmet(project_requirements(), pins)

    # Pins for other platforms (colorama on Windows) cannot be followed on this machine.
    assert {name for name, pin in pins.items() if pin.applies()} == reached


def test_runtime_and_dev_locks_pin_shared_packages_at_the_same_versions() -> None:
    runtime, dev = read_lock(RUNTIME_LOCK), read_lock(DEV_LOCK)

    assert set(runtime) <= set(dev)
    assert {name: dev[name].version for name in runtime} == {
        name: pin.version for name, pin in runtime.items()
    }


def test_the_build_lock_satisfies_the_build_system_and_pins_pip() -> None:
    pins = read_lock(BUILD_LOCK)

    assert "pip" in pins
    for requirement in build_requirements():
        pin = pins[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(pin.version), (str(requirement), pin.version)


def test_a_requirement_the_lock_does_not_allow_is_reported() -> None:
    pins = read_lock(RUNTIME_LOCK)
    pinned = pins[canonicalize_name("click")].version

    _, failures = unmet([Requirement(f"click>{pinned}"), Requirement("h11-absent")], pins)

    assert failures == [
        "h11-absent (wanted by pyproject.toml) is not in the lock",
        f"click>{pinned} (wanted by pyproject.toml) is pinned at {pinned}",
    ]


def test_the_test_environment_was_installed_from_the_dev_and_build_locks() -> None:
    locked: dict[NormalizedName, Pin] = {**read_lock(DEV_LOCK), **read_lock(BUILD_LOCK)}
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    installed.pop(canonicalize_name("slot-expiration"))

    assert sys.prefix != sys.base_prefix, "the suite runs in ./scripts/test's .venv"
    assert installed == {
        str(name): str(pin.version) for name, pin in locked.items() if pin.applies()
    }
