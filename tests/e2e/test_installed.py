"""Every command the README and docs/ name runs from the install users get: the console script
of the wheel installed non-editable into the test environment (tests/conftest.py refuses any
other)."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import distribution
from pathlib import Path

import click
import pytest

from slot_expiration.cli.app import cli
from tests.e2e.command import PROGRAM, run_command
from tests.support.artifact import REPOSITORY, installed_package

pytestmark = pytest.mark.e2e

# "slot-expiration <word>" in the prose, where <word> is not a command.
PROSE = {"page"}
DOCUMENTS = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").rglob("*.md"))]
NAMED = re.compile(r"(?:^|[\s`/])slot-expiration ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", re.M)


def _documented_commands() -> list[tuple[str, ...]]:
    """Each command (and subcommand of a group) the README and docs/ name, once."""
    found: set[tuple[str, ...]] = set()
    text = "\n".join(path.read_text(encoding="utf-8") for path in DOCUMENTS)
    for name, then in NAMED.findall(text):
        if name in PROSE:
            continue
        command = cli.commands.get(name)
        assert command is not None, f"the docs name `slot-expiration {name}`, no such command"
        if isinstance(command, click.Group) and then in command.commands:
            found.add((name, then))
        else:
            found.add((name,))
    return sorted(found)


def test_the_console_script_is_the_installed_wheels() -> None:
    entry = distribution("slot-expiration").locate_file("slot_expiration")

    assert Path(str(entry)).resolve() == installed_package()
    assert PROGRAM.exists()
    assert "site-packages" in installed_package().parts


def test_the_docs_name_every_command_the_program_has() -> None:
    named = {command[0] for command in _documented_commands()}

    assert named == set(cli.commands)


@pytest.mark.parametrize("command", _documented_commands(), ids=" ".join)
async def test_each_command_the_docs_name_answers_help_from_the_install(
    command: tuple[str, ...],
) -> None:
    done = await run_command(*command, "--help")

    assert done.returncode == 0, done.describe()
    assert done.stdout.startswith(f"Usage: slot-expiration {' '.join(command)} "), done.stdout
    assert done.stderr == ""


async def test_version_option_prints_the_pyproject_version() -> None:
    with (REPOSITORY / "pyproject.toml").open("rb") as file:
        version = tomllib.load(file)["project"]["version"]

    done = await run_command("--version")

    assert done.returncode == 0, done.describe()
    assert done.stdout == f"slot-expiration, version {version}\n"
