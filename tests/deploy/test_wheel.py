"""The wheel users install holds exactly the package's tracked files (a template, stylesheet
or SQL file forgotten by the packaging fails here, not in production), no benchmark, and is
what the test environment runs."""

from __future__ import annotations

import email
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import tomllib
import zipfile
from email.message import Message
from importlib.metadata import distribution
from pathlib import Path

import pytest

from tests.support.artifact import (
    PACKAGE,
    REPOSITORY,
    build_wheel,
    compare,
    copy_tracked_files,
    installed_package,
    suite_wheel,
    tracked_package_files,
    wheel_package_files,
)

pytestmark = pytest.mark.deploy

# What the packaging listed by hand before it took every file by glob: the stylesheet the
# page inlines was not in it, and `ui` answered 500 to every request from the wheel.
HAND_LISTED = [
    f"src/{PACKAGE}/{glob}"
    for glob in (
        "**/*.py",
        "py.typed",
        "*/*.sql",
        "schema/migrations/script.py.mako",
        "ui/templates/*.html",
    )
]


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
    built = build_wheel(tmp_path, include=HAND_LISTED)

    difference = compare(tracked_package_files(), wheel_package_files(built))

    assert f"{PACKAGE}/ui/templates/page.css" in difference.missing
    assert difference.stray == []


def test_a_build_tree_left_by_an_older_release_leaves_nothing_in_the_wheel(
    tmp_path: Path,
) -> None:
    """A checkout where an older release was installed from source keeps its build/ (and
    egg-info): files since removed or renamed must not come back in the next wheel."""
    tree = copy_tracked_files(tmp_path / "tree")
    stale = {
        f"build/lib/{PACKAGE}/db/removed_in_this_release.sql": "SELECT 1;\n",
        f"build/lib/{PACKAGE}/cycle/renamed_since.py": "VALUE = 1\n",
        f"build/lib/{PACKAGE}/ui/templates/page.css": "body {}\n",
        f"src/{PACKAGE.replace('_', '-')}.egg-info/SOURCES.txt": "old\n",
    }
    for name, text in stale.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text, encoding="utf-8")

    built = build_wheel(tmp_path, tree=tree)

    difference = compare(tracked_package_files(), wheel_package_files(built))
    assert not difference, difference.describe()
    with zipfile.ZipFile(built) as archive:
        css = archive.read(f"{PACKAGE}/ui/templates/page.css")
    assert css == (REPOSITORY / "src" / PACKAGE / "ui/templates/page.css").read_bytes()


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


def _metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(archive.read(name))


def _project_urls(metadata: Message) -> dict[str, str]:
    return dict(entry.split(", ", 1) for entry in metadata.get_all("Project-URL") or [])


def test_the_metadata_names_its_license_authors_keywords_classifiers_and_urls(
    wheel: Path,
) -> None:
    metadata = _metadata(wheel)

    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE"]
    with zipfile.ZipFile(wheel) as archive:
        (licence,) = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        shipped = archive.read(licence)
    assert shipped == (REPOSITORY / "LICENSE").read_bytes()
    assert b"Apache License" in shipped
    assert b"Version 2.0, January 2004" in shipped
    assert metadata["Author"]
    assert "postgresql" in metadata["Keywords"].split(",")
    classifiers = metadata.get_all("Classifier") or []
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert "Typing :: Typed" in classifiers
    assert {"Homepage", "Documentation", "Source", "Changelog"} <= _project_urls(metadata).keys()


def test_the_long_description_reads_on_its_own_every_link_absolute_and_to_a_tracked_file(
    wheel: Path,
) -> None:
    metadata = _metadata(wheel)
    body = metadata.get_payload()
    assert isinstance(body, str)
    tree = f"{_project_urls(metadata)['Source']}/-/blob/main/"
    tracked = set(
        subprocess.run(
            ["git", "ls-files"], cwd=REPOSITORY, capture_output=True, check=True, text=True
        ).stdout.split()
    )

    links = re.findall(r"\]\(([^)\s]+)\)", body)

    assert len(links) >= 10, body
    relative = [link for link in links if not link.startswith(("https://", "#"))]
    assert not relative, f"links that work only in a checkout: {relative}"
    for link in links:
        if link.startswith(tree):
            path = link.removeprefix(tree).split("#", 1)[0]
            assert path in tracked or any(t.startswith(path) for t in tracked), link


def test_pip_show_shows_the_license_and_the_urls() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "pip", "show", "--verbose", "slot-expiration"],
        capture_output=True,
        check=True,
        text=True,
        timeout=60,
    ).stdout

    assert "License-Expression: Apache-2.0" in shown
    assert re.search(r"(?m)^Home-page: https://\S+", shown), shown
    assert re.search(r"(?m)^Project-URLs:\n  Homepage, https://", shown), shown


def _build_as_the_scripts_do(checkout: Path) -> Path:
    (checkout / ".venv").symlink_to(REPOSITORY / ".venv")
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    built = subprocess.run(
        ["bash", "-c", "source scripts/lib/setup.sh && build_wheel"],
        cwd=checkout,
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    return checkout / built.stdout.strip()


def test_two_builds_of_one_commit_checked_out_at_different_times_are_the_same_bytes(
    tmp_path: Path,
) -> None:
    checkouts = [tmp_path / "first", tmp_path / "second"]
    for checkout in checkouts:
        subprocess.run(
            ["git", "clone", "-q", "--no-hardlinks", str(REPOSITORY), str(checkout)],
            check=True,
            timeout=120,
        )
    # The second checkout's files dated a day later, as a checkout made tomorrow would be.
    later = time.time() + 86_400
    for path in checkouts[1].rglob("*"):
        if ".git" not in path.relative_to(checkouts[1]).parts:
            os.utime(path, (later, later))
    committed = int(
        subprocess.run(
            ["git", "log", "-1", "--format=%ct"],
            cwd=checkouts[0],
            capture_output=True,
            check=True,
            text=True,
        ).stdout
    )

    first, second = (_build_as_the_scripts_do(checkout) for checkout in checkouts)

    assert (
        hashlib.sha256(first.read_bytes()).digest() == hashlib.sha256(second.read_bytes()).digest()
    )
    with zipfile.ZipFile(first) as archive:
        stamps = {info.date_time for info in archive.infolist()}
    # The commit's time (zip keeps even seconds), not the checkout's or the build's.
    assert stamps == {time.gmtime(committed - committed % 2)[:6]}, stamps
