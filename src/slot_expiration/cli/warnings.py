"""Warnings about the environment: a SLOT_EXPIRATION_* variable no command reads (a
misspelling, say) is named once, with the closest real one, never silently ignored."""

from __future__ import annotations

import sys

import structlog

from slot_expiration.cli.errors import PROGRAM
from slot_expiration.cli.option_flags import unknown_variable_warnings
from slot_expiration.telemetry import LogEvent

# These log on stderr, one JSON object per line: they tell through a log event.
LOGGING_COMMANDS = frozenset({"once", "run"})


def print_unknown_variables() -> None:
    for line in unknown_variable_warnings():
        print(f"{PROGRAM}: warning: {line}", file=sys.stderr)


def log_unknown_variables() -> None:
    log = structlog.get_logger("slot_expiration")
    for line in unknown_variable_warnings():
        log.warning(LogEvent.UNKNOWN_VARIABLE, detail=line)
