"""The wheel users install holds exactly the package's tracked files (a template, stylesheet
or SQL file forgotten by the packaging fails here, not in production), no benchmark, and is
what the test environment runs."""

from __future__ import annotations

import hashlib
import json
import tomllib
import zipfile
from importlib.metadata import distribution
from pathlib import Path

import pytest

from tests.support.artifact import (
    PACKAGE,
    REPOSITORY,
    build_wheel,
    compare,
    installed_package,
    suite_wheel,
    tracked_package_files,
    wheel_package_files,
)

pytestmark = pytest.mark.deploy

# What the packaging listed by hand before it took every file by glob: the stylesheet the
# page inlines was not in it, and `ui` answered 500 to every request from the wheel.
HAND_LISTED = ["py.typed", "store/*.sql", "store/migrations/script.py.mako", "ui/templates/*.html"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ./scripts/test built and installed, or one built here from the tracked files."""
    return suite_wheel() or build_wheel(tmp_path_factory.mktemp("wheel"))


def test_the_wheel_holds_every_tracked_file_of_the_package_and_nothing_else(
    wheel: Path,
) -> None:
    difference = compare(tracked_package_files(), wheel_package_files(wheel))

    assert not difference, difference.describe()
    assert f"{PACKAGE}/ui/templates/page.css" in wheel_package_files(wheel)


def test_the_wheel_holds_no_benchmark(wheel: Path) -> None:
    names = wheel_package_files(wheel)

    assert not [n for n in names if n.startswith(("benchmarks/", f"{PACKAGE}/bench/"))]
    assert not [n for n in names if n.endswith("bench.sql")]


def test_the_wheel_installs_the_command_and_the_version_of_pyproject(wheel: Path) -> None:
    pyproject = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))
    version = pyproject["project"]["version"]

    assert wheel.name == f"{PACKAGE}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        entry_points = archive.read(f"{PACKAGE}-{version}.dist-info/entry_points.txt").decode()
    assert "slot-expiration = slot_expiration.cli.app:main" in entry_points


def test_the_suite_runs_this_wheel_installed_not_editable(wheel: Path) -> None:
    installed = distribution("slot-expiration")
    direct_url = json.loads(installed.read_text("direct_url.json") or "{}")

    assert not direct_url.get("dir_info", {}).get("editable", False)
    assert installed_package().parent.name == "site-packages"
    with zipfile.ZipFile(wheel) as archive:
        for name in wheel_package_files(wheel):
            on_disk = installed_package().parent / name
            assert on_disk.read_bytes() == archive.read(name), name
    assert installed.version == wheel.name.split("-")[1]


def test_a_hand_listed_package_data_leaves_the_stylesheet_out_and_is_caught(
    tmp_path: Path,
) -> None:
    """The comparison above on a real build of the packaging this replaced: it names the file."""
    built = build_wheel(tmp_path, package_data=HAND_LISTED)

    difference = compare(tracked_package_files(), wheel_package_files(built))

    assert f"{PACKAGE}/ui/templates/page.css" in difference.missing
    assert difference.stray == []


def test_a_file_in_the_package_that_is_not_tracked_is_caught_as_stray() -> None:
    tracked = tracked_package_files()

    difference = compare(tracked, [*tracked, f"{PACKAGE}/ui/templates/notes.txt"])

    assert difference.stray == [f"{PACKAGE}/ui/templates/notes.txt"]
    assert difference.missing == []


def test_the_installed_files_hash_as_the_source_tree_does() -> None:
    """The guard of tests/conftest.py compares exactly this; here it is shown to hold."""
    source = REPOSITORY / "src" / PACKAGE
    for name in tracked_package_files():
        relative = name.removeprefix(f"{PACKAGE}/")
        assert (
            hashlib.sha256((installed_package() / relative).read_bytes()).digest()
            == hashlib.sha256((source / relative).read_bytes()).digest()
        ), name
