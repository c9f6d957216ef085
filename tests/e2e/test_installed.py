"""Every command the README names runs from the install users get: the console script of the
wheel installed non-editable into the test environment (tests/conftest.py refuses any other)."""

from __future__ import annotations

import re
from importlib.metadata import distribution
from pathlib import Path

import click
import pytest

from slot_expiration.cli.app import cli
from tests.e2e.command import PROGRAM, run_command
from tests.support.artifact import REPOSITORY, installed_package

pytestmark = pytest.mark.e2e

# "slot-expiration <word>" in the README's prose, where <word> is not a command.
PROSE = {"page"}
NAMED = re.compile(r"(?:^|[\s`/])slot-expiration ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", re.M)


def _readme_commands() -> list[tuple[str, ...]]:
    """Each command (and subcommand of a group) the README names, once."""
    found: set[tuple[str, ...]] = set()
    for name, then in NAMED.findall((REPOSITORY / "README.md").read_text(encoding="utf-8")):
        if name in PROSE:
            continue
        command = cli.commands.get(name)
        assert command is not None, f"the README names `slot-expiration {name}`, no such command"
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


def test_the_readme_names_every_command_the_program_has() -> None:
    named = {command[0] for command in _readme_commands()}

    assert named == set(cli.commands)


@pytest.mark.parametrize("command", _readme_commands(), ids=" ".join)
async def test_each_command_the_readme_names_answers_help_from_the_install(
    command: tuple[str, ...],
) -> None:
    done = await run_command(*command, "--help")

    assert done.returncode == 0, done.describe()
    assert done.stdout.startswith(f"Usage: slot-expiration {' '.join(command)} "), done.stdout
    assert done.stderr == ""
