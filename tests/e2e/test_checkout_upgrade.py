"""A checkout install upgraded in place, as the README says: 0.2.0 is checked out from this
repository's history and installed with its README's install lines, used (`migrate`,
`once`), then the checkout moves to this release and the same lines of this README install
it over the old one; `migrate`, `once` and `status --check` then work on the suite's
PostgreSQL, and the installed package holds exactly this release's files.

0.2.0 built its wheel with setuptools, which leaves build/ in the checkout: a builder that
reuses it put 13 files removed or renamed since into the next wheel, and every command
failed with a traceback (`fragment 'due_slot_predicate' is defined twice`).

pip reads the locked wheels from a local folder (PIP_NO_INDEX, PIP_FIND_LINKS), filled once
per lock content by scripts/lib/setup.sh's wheelhouse: the commands run are the README's.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.e2e.command import clean_env, with_password
from tests.support.artifact import REPOSITORY
from tests.support.database import SlotDatabase
from tests.support.slots import past_slots

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

PREVIOUS_RELEASE = "0.2.0"
INSTALL_TIMEOUT_SECONDS = 600
COMMAND_TIMEOUT_SECONDS = 120
PACKAGE = "slot_expiration"


def git(checkout: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=checkout, capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.strip()


def release_commit(version: str) -> str:
    """The commit that released `version`, found in the history by its message."""
    found = git(REPOSITORY, "log", "--format=%H", "-i", f"--grep=^release {version}\\b")
    assert found, f"no commit in the history releases {version}"
    commit = found.splitlines()[-1]
    assert f'version = "{version}"' in git(REPOSITORY, "show", f"{commit}:pyproject.toml")
    return commit


def install_lines(readme: str) -> list[str]:
    """The README's lines that make the virtual environment and install into it."""
    lines = []
    for line in readme.splitlines():
        command = line.split("  #", 1)[0].split("   #", 1)[0].strip()
        if command.startswith(("python3 -m venv ", ".venv/bin/pip install ")):
            lines.append(command)
    assert any("pip install" in line and line.endswith(" .") for line in lines), lines
    return lines


def wheelhouse(checkout: Path) -> Path:
    """The locked wheels of the checkout's build and runtime locks, in a local folder."""
    locks = [checkout / "requirements/build.txt", checkout / "requirements/runtime.txt"]
    done = subprocess.run(
        [
            "bash",
            "-c",
            'source scripts/lib/setup.sh && wheelhouse "$@"',
            "wheelhouse",
            *map(str, locks),
        ],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=False,
        timeout=INSTALL_TIMEOUT_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    return REPOSITORY / done.stdout.strip()


def install_as_the_readme_says(checkout: Path) -> str:
    """Run the checkout's own README's install lines in it; their output."""
    env = clean_env(
        {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse(checkout)), "PIP_NO_INPUT": "1"}
    )
    env.pop("VIRTUAL_ENV", None)
    output = []
    for line in install_lines((checkout / "README.md").read_text(encoding="utf-8")):
        done = subprocess.run(
            shlex.split(line),
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=INSTALL_TIMEOUT_SECONDS,
        )
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        output.append(done.stdout + done.stderr)
    return "\n".join(output)


def slot_expiration(checkout: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The checkout's own console script, with the URL in the environment as README sets it."""
    return subprocess.run(
        [str(checkout / ".venv/bin/slot-expiration"), *args],
        cwd=checkout,
        env=clean_env({"SLOT_EXPIRATION_DATABASE_URL": url}),
        capture_output=True,
        text=True,
        check=False,
        timeout=COMMAND_TIMEOUT_SECONDS,
    )


def installed_files(checkout: Path) -> dict[str, str]:
    (site,) = (checkout / ".venv/lib").glob("python3*/site-packages")
    root = site / PACKAGE
    return {
        f"{PACKAGE}/{path.relative_to(root).as_posix()}": hashlib.sha256(
            path.read_bytes()
        ).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def tracked_files(checkout: Path) -> dict[str, str]:
    names = git(checkout, "ls-files", "--", f"src/{PACKAGE}").splitlines()
    return {
        name.removeprefix("src/"): hashlib.sha256((checkout / name).read_bytes()).hexdigest()
        for name in names
    }


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A clone of this repository, at 0.2.0."""
    path = tmp_path / "slot-expiration"
    subprocess.run(
        ["git", "clone", "-q", "--no-hardlinks", str(REPOSITORY), str(path)],
        check=True,
        timeout=120,
    )
    git(path, "checkout", "-q", release_commit(PREVIOUS_RELEASE))
    return path


async def test_a_checkout_install_of_0_2_0_upgrades_in_place_as_the_readme_says(
    checkout: Path, empty_database_url: str
) -> None:
    url = with_password(empty_database_url)
    this_release = git(REPOSITORY, "rev-parse", "HEAD")

    install_as_the_readme_says(checkout)
    before = slot_expiration(checkout, url, "--version")
    assert before.stdout.split()[-1] == PREVIOUS_RELEASE, before.stdout
    migrated = slot_expiration(checkout, url, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    async with SlotDatabase.open(empty_database_url) as db:
        await db.insert(past_slots(3))
    assert slot_expiration(checkout, url, "once").returncode == 0
    assert (checkout / "build").is_dir(), "0.2.0's build left no build/: nothing is tested"

    git(checkout, "checkout", "-q", this_release)
    install_as_the_readme_says(checkout)

    version = slot_expiration(checkout, url, "--version")
    assert (
        version.stdout.split()[-1]
        == git(checkout, "show", "HEAD:pyproject.toml").split('version = "', 1)[1].split('"', 1)[0]
    )
    assert installed_files(checkout) == tracked_files(checkout)
    async with SlotDatabase.open(empty_database_url) as db:
        await db.insert(past_slots(2))
    for args, says in [
        (("migrate",), r"^schema migrated from \d{4} to \d{4}"),
        (("once",), r"^expired 2\b"),
        (("status", "--check"), r"^OK\b"),
    ]:
        done = slot_expiration(checkout, url, *args)
        assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        assert re.search(says, done.stdout), f"{args}: {done.stdout}{done.stderr}"


def test_the_release_commit_is_found_and_the_install_lines_are_read_from_a_readme() -> None:
    commit = release_commit(PREVIOUS_RELEASE)

    lines = install_lines((REPOSITORY / "README.md").read_text(encoding="utf-8"))

    assert len(commit) == 40
    assert lines[0] == "python3 -m venv .venv"
    assert lines[-1] == ".venv/bin/pip install --no-deps --no-build-isolation ."
    assert os.sep not in commit
