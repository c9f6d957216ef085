"""The `slot-expiration` command line.

Command and option names are a contract other tools script against. Each
group of commands lives in a module of its own and is registered here.
"""

from __future__ import annotations

import os
import sys

import click

from slot_expiration.cli.admin_commands import grant
from slot_expiration.cli.common import with_typed_secrets_redacted
from slot_expiration.cli.demo_command import demo
from slot_expiration.cli.errors import PROGRAM, ExitCode, fail
from slot_expiration.cli.pause_commands import pause, resume
from slot_expiration.cli.quarantine_commands import quarantine
from slot_expiration.cli.slots_commands import slots
from slot_expiration.cli.status_command import status, unknown_usage
from slot_expiration.cli.ui_command import ui
from slot_expiration.cli.warnings import LOGGING_COMMANDS, print_unknown_variables
from slot_expiration.cli.worker_commands import migrate, once, run


@click.group(
    name=PROGRAM,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="slot-expiration", prog_name=PROGRAM)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Moves Available slots whose start has passed to Expired, in batches, oldest first."""
    if ctx.invoked_subcommand not in LOGGING_COMMANDS:
        print_unknown_variables()


for command in (migrate, grant, once, run, pause, resume, quarantine, slots, demo, status, ui):
    cli.add_command(command)


def main() -> None:
    """Console entry point: click's own usage errors become one line too (for
    `status --check`, the monitoring plugins' UNKNOWN on stdout, exit 3)."""
    try:
        _run()
    finally:
        _let_go_of_unwritable_streams()


def _run() -> None:
    try:
        code = cli.main(prog_name=PROGRAM, standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        fail(_missing_command(exc.ctx), ExitCode.USAGE)
    except click.ClickException as exc:
        message = with_typed_secrets_redacted(exc.format_message())
        if _checking_status(sys.argv[1:]):
            unknown_usage(message)
        fail(message, ExitCode.USAGE)
    except (click.exceptions.Abort, KeyboardInterrupt):
        print(f"{PROGRAM}: interrupted", file=sys.stderr)
        raise SystemExit(ExitCode.INTERRUPTED) from None
    raise SystemExit(code if isinstance(code, int) else ExitCode.OK)


def _let_go_of_unwritable_streams() -> None:
    """A stream that cannot be written (stderr on a full device, stdout into a closed pipe)
    is flushed once more here and, failing, replaced by the null device: Python would
    otherwise fail its own flush at exit and turn the command's exit status into 120
    (the way the Python docs handle SIGPIPE). What the command did stands; its status
    says so."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            stream.flush()
        except (OSError, ValueError):
            setattr(sys, name, open(os.devnull, "w"))  # noqa: SIM115 - for exit


def _missing_command(ctx: click.Context | None) -> str:
    """`slot-expiration` or `slot-expiration slots` alone: a usage error like any other,
    one line on stderr naming the commands and the usage, never the help on stdout."""
    if ctx is None or not isinstance(ctx.command, click.Group):
        return "missing arguments; see --help"
    commands = ", ".join(ctx.command.list_commands(ctx))
    usage = " ".join(ctx.get_usage().split()).removeprefix("Usage: ")
    return f"missing command, one of: {commands}; usage: {usage} (--help for more)"


def _checking_status(args: list[str]) -> bool:
    """Whether the command line asks for `status --check` (a monitoring plugin's run)."""
    words = [arg for arg in args if not arg.startswith("-")]
    return bool(words) and words[0] == "status" and "--check" in args
