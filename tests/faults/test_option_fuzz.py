"""Any string for any option of `once` and `run`, as a flag (`--opt=value`, `--opt value`) or
as its SLOT_EXPIRATION_* variable: one line on stderr, exit 2, never a traceback, never a
password.

The options come from the commands themselves, so a new option is fuzzed too.
Nothing here reaches a database: no URL is given, or the one given is unusable
(a usable URL would rightly make the command connect, and is left out).
Most examples run the real entry point in-process; a few run the installed
command in a subprocess, as users do.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass

import click
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from slot_expiration.cli.app import main
from slot_expiration.cli.worker_commands import once, run
from slot_expiration.options import OptionsError, load_options
from tests.e2e.command import ENV_PREFIX, PROGRAM, clean_env

pytestmark = pytest.mark.faults

USAGE = 2
ERROR_PREFIX = "slot-expiration: error: "


@dataclass(frozen=True, slots=True)
class Option:
    command: str
    name: str
    flag: str
    envvar: str | None
    takes_value: bool  # an on/off flag takes a string only through its variable


def fuzzable_options(command: click.Command) -> list[Option]:
    """Every option of `command` a string can be given to: those that take a value, and
    the on/off flags that have a SLOT_EXPIRATION_* variable (--json has none)."""
    found = []
    for param in command.params:
        if not isinstance(param, click.Option) or not param.name:
            continue
        envvar = param.envvar if isinstance(param.envvar, str) else None
        if param.is_flag and envvar is None:
            continue
        flag = next(o for o in param.opts if o.startswith("--"))
        found.append(Option(str(command.name), param.name, flag, envvar, not param.is_flag))
    return found


OPTIONS = fuzzable_options(once) + fuzzable_options(run)
WAYS = ("--opt=value", "--opt value", "variable")


@dataclass(frozen=True, slots=True)
class Attempt:
    option: Option
    way: str
    value: str
    secret: str | None  # a password inside `value`, which no output may show

    @property
    def args(self) -> list[str]:
        if self.way == "--opt=value" or (self.way == "variable" and not self.option.envvar):
            return [self.option.command, f"{self.option.flag}={self.value}"]
        if self.way == "--opt value":
            return [self.option.command, self.option.flag, self.value]
        return [self.option.command]

    @property
    def env(self) -> dict[str, str]:
        if self.way == "variable" and self.option.envvar:
            return {self.option.envvar: self.value}
        return {}


def usable_url(value: str) -> bool:
    try:
        load_options(environment=False, database_url=value)
    except OptionsError:
        return False
    return True


any_text = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
passwords = st.from_regex(r"pw-[A-Za-z0-9]{12}", fullmatch=True)


@st.composite
def attempts(draw: st.DrawFn) -> Attempt:
    option = draw(st.sampled_from(OPTIONS))
    way = draw(st.sampled_from(WAYS)) if option.takes_value else "variable"
    secret = draw(st.none() | passwords)
    if secret is None:
        value = draw(any_text)
    else:  # a URL carrying a password, often broken elsewhere (host, port, tail)
        host = draw(st.sampled_from(["db.internal", "127.0.0.1", ""]) | any_text)
        port = draw(st.sampled_from(["5432", "0", "99999", "x"]) | any_text)
        value = f"postgresql://worker:{secret}@{host}:{port}/{draw(any_text)}"
    if option.name == "database_url":
        assume(not usable_url(value))  # it would connect, as it should
    return Attempt(option, way, value, secret)


@contextmanager
def invoked_as(args: list[str], env: dict[str, str]) -> Iterator[None]:
    """sys.argv and the environment of a command line, restored afterwards."""
    saved_argv, saved_env = sys.argv, dict(os.environ)
    sys.argv = [str(PROGRAM), *args]
    for name in [n for n in os.environ if n.startswith(ENV_PREFIX)]:
        del os.environ[name]
    os.environ.update(env)
    try:
        yield
    finally:
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)


def run_in_process(attempt: Attempt) -> tuple[object, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with invoked_as(attempt.args, attempt.env), redirect_stdout(out), redirect_stderr(err):
        try:
            main()
        except SystemExit as exit_:
            return exit_.code, out.getvalue(), err.getvalue()
    raise AssertionError("main() returned without exiting")


def assert_one_usage_line(attempt: Attempt, code: object, stdout: str, stderr: str) -> None:
    shown = f"{attempt}: exit {code!r}, stdout {stdout!r}, stderr {stderr!r}"
    assert code == USAGE, shown
    assert stdout == "", shown
    assert stderr.endswith("\n"), shown
    assert len(stderr.splitlines()) == 1, shown
    assert stderr.startswith(ERROR_PREFIX), shown
    assert "Traceback" not in stderr, shown
    if attempt.secret is not None:
        assert attempt.secret not in stderr, shown


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(attempt=attempts())
def test_any_string_for_any_option_is_one_usage_line_in_process(attempt: Attempt) -> None:
    code, stdout, stderr = run_in_process(attempt)

    assert_one_usage_line(attempt, code, stdout, stderr)


# About a second per example: a few dozen, and no shrinking (the in-process test above
# shrinks the same inputs a thousand times faster).
@settings(
    max_examples=30,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
@given(attempt=attempts())
def test_any_string_for_any_option_is_one_usage_line_from_the_command(attempt: Attempt) -> None:
    done = subprocess.run(
        [str(PROGRAM), *attempt.args],
        env=clean_env(attempt.env),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )

    assert_one_usage_line(attempt, done.returncode, done.stdout, done.stderr)
