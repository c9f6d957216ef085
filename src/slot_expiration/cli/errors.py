"""One line on stderr and a non-zero exit for every failure a user can cause."""

from __future__ import annotations

import sys
from typing import NoReturn

PROGRAM = "slot-expiration"


class ExitCode:
    OK = 0
    FAILURE = 1  # the command ran but could not do its job (database down, budget exceeded)
    USAGE = 2  # the command line or the options are wrong; nothing was attempted
    RULE = 3  # a rule of the slot context refused the request (CAL_SLOT_*); nothing written
    INTERRUPTED = 130  # stopped by SIGINT/SIGTERM before it finished; nothing half-done


def fail(message: str, code: int) -> NoReturn:
    """One line: no message of ours quotes a password (a URL is shown as redact_url
    rebuilds it from its parts), so nothing is masked in it afterwards."""
    print(f"{PROGRAM}: error: {' '.join(message.split())}", file=sys.stderr)
    raise SystemExit(code)


def reject(code: str, message: str) -> NoReturn:
    """A rule rejection: one line that starts with its stable code, exit 3."""
    print(f"{code}: {' '.join(message.split())}", file=sys.stderr)
    raise SystemExit(ExitCode.RULE)
