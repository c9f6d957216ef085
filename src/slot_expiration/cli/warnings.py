"""Warnings about the environment: a SLOT_EXPIRATION_* variable no command reads (a
misspelling, say) is named once, with the closest real one, and an OTEL_TRACES_EXPORTER
this worker cannot send spans to once: never silently ignored."""

from __future__ import annotations

import os
import sys

import structlog

from slot_expiration.cli.errors import PROGRAM
from slot_expiration.cli.option_flags import unknown_variable_warnings
from slot_expiration.telemetry import LogEvent
from slot_expiration.telemetry.traces import unsupported_exporters

# These log on stderr, one JSON object per line: they tell through a log event.
LOGGING_COMMANDS = frozenset({"once", "run"})


def print_unknown_variables() -> None:
    for line in unknown_variable_warnings():
        print(f"{PROGRAM}: warning: {line}", file=sys.stderr)


def log_environment_warnings() -> None:
    log = structlog.get_logger("slot_expiration")
    for line in unknown_variable_warnings():
        log.warning(LogEvent.UNKNOWN_VARIABLE, detail=line)
    unsupported = unsupported_exporters(os.environ)
    if unsupported:
        log.warning(
            LogEvent.UNSUPPORTED_EXPORTER,
            detail=f"OTEL_TRACES_EXPORTER names {', '.join(unsupported)}: this worker exports "
            "traces over OTLP only (otlp, or none to turn them off); ignored",
        )
