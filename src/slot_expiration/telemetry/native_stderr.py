"""What native code writes straight to the process's stderr, libpq's own warnings above all
(`WARNING: password file "/dev/null" is not a plain file`, printed by libpq itself, never
through Python): each line becomes one log record, so that every line on stderr of `once` and
`run` is one of their records, or the final error line.

The process's stderr (file descriptor 2, where C's `stderr` writes) becomes a pipe a thread
reads; Python's own `sys.stderr` moves to a copy of the real one, so the records, warnings and
the final error line go there directly.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Final

import structlog

from slot_expiration.telemetry.logs import LogEvent

STDERR: Final = 2
# How long a stopping command waits for the lines still in the pipe (a child process that
# inherited it may keep it open: the wait is bounded).
DRAIN_SECONDS: Final = 2.0
_LEVELS: Final = {
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.ERROR,
    "PANIC": logging.ERROR,
}


@contextmanager
def native_stderr_logged() -> Iterator[None]:
    """Within the block, each line native code writes to stderr is logged as a record of
    its own (`native.stderr`, its level from libpq's prefix, `warning` if none). Where
    Python's stderr is not the process's (a caller redirected it), nothing is changed."""
    if not _writes_to_the_process_stderr():
        yield
        return
    with suppress(OSError):  # a stderr that cannot be written (a full device) loses it
        sys.stderr.flush()
    previous = sys.stderr
    real = os.dup(STDERR)
    read_end, write_end = os.pipe()
    os.dup2(write_end, STDERR)
    os.close(write_end)
    # Line-buffered, on the real stderr: Python's writes never pass through the pipe.
    sys.stderr = open(  # noqa: SIM115 - kept open: the logs configured in the block write here
        real, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False
    )
    reader = threading.Thread(target=_log_lines, args=(read_end,), name="native-stderr")
    reader.daemon = True
    reader.start()
    try:
        yield
    finally:
        # The pipe's last writer goes: the reader logs what is left, then sees its end.
        os.dup2(real, STDERR)
        reader.join(DRAIN_SECONDS)
        with suppress(OSError):  # a stderr that cannot be written (a full device) loses it
            sys.stderr.flush()
        sys.stderr = previous  # fd 2 is the real stderr again


def _writes_to_the_process_stderr() -> bool:
    try:
        return sys.stderr.fileno() == STDERR
    except (AttributeError, OSError, ValueError):  # io.StringIO and the like
        return False


def _log_lines(fd: int) -> None:
    log = structlog.get_logger("slot_expiration")
    with open(fd, "rb") as pipe:
        for raw in pipe:
            line = raw.decode("utf-8", errors="replace").strip()
            if line:
                level, detail = split_level(line)
                log.log(level, LogEvent.NATIVE_STDERR, detail=detail)


def split_level(line: str) -> tuple[int, str]:
    """libpq's `WARNING:  text` as (WARNING, text); a line with no such prefix a warning."""
    prefix, _, rest = line.partition(":")
    level = _LEVELS.get(prefix.strip())
    return (level, rest.strip()) if level is not None else (logging.WARNING, line)
