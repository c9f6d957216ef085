"""Reading what the `slots` commands are given: moments, START/END ranges, a file of
them, a page cursor. Anything malformed is a usage error (exit 2) naming the option."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from itertools import count
from typing import Any, BinaryIO, Final, TypeVar

import click

from slot_expiration.slots import MAX_BATCH_SLOTS, ShowcaseCursor, SlotRange

T = TypeVar("T")

MAX_FILE_BYTES: Final = 1024 * 1024
"""The most a --from-file may hold. A publication is at most 500 START/END lines of under
100 bytes each (about 50 KB); 1 MiB leaves twenty times that for comments and blank
lines, and bounds what a wrong path (/dev/zero, a log, an endless pipe) can cost."""

MAX_LINE_BYTES: Final = 4096
"""The longest line of a --from-file, its newline not counted: a START/END is under 100
bytes, the rest is room for a comment. It also keeps an echoed line readable."""

SHOWN_CHARS: Final = 60
"""How much of a malformed line an error repeats: enough to recognise it, one line."""


def parse_moment(text: str) -> datetime:
    """ISO-8601; no offset means UTC. Raises ValueError."""
    moment = datetime.fromisoformat(text.strip())
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def parse_range(text: str) -> SlotRange:
    """START/END, both ISO-8601. Raises ValueError."""
    start, separator, end = text.partition("/")
    if not separator:
        raise ValueError("expected START/END")
    return SlotRange(parse_moment(start), parse_moment(end))


def _converted(convert: Callable[[str], T], what: str) -> Callable[..., Any]:
    """A click callback turning the option's text (or texts, for a repeated option)
    into values; a malformed one is a usage error, and click names the option."""

    def one(text: str) -> T:
        try:
            return convert(text)
        except ValueError:
            raise click.BadParameter(f"{text!r} is not {what}") from None

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, tuple):
            return tuple(one(item) for item in value)
        return one(value)

    return callback


def read_ranges(source: BinaryIO, option: str = "--from-file") -> list[SlotRange]:
    """One START/END per line; blank lines and lines starting with # are skipped."""
    ranges: list[SlotRange] = []
    for number, line in read_lines(source, option):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            ranges.append(parse_range(text))
        except ValueError:
            raise click.BadParameter(
                f"line {number}: {_shown(text)!r} is not START/END in ISO-8601", param_hint=option
            ) from None
    return ranges


def read_lines(source: BinaryIO, option: str = "--from-file") -> Iterator[tuple[int, str]]:
    """The lines of a UTF-8 file or stream, numbered from 1, one in memory at a time.

    A usage error naming `option` if it holds more than MAX_FILE_BYTES, a line
    longer than MAX_LINE_BYTES or bytes that are not UTF-8. Asks the source for
    at most MAX_FILE_BYTES + 1 bytes (a buffered stream reads one buffer ahead):
    whatever it is, it is never read whole.
    """
    _refuse_a_large_regular_file(source, option)
    offset = 0
    for number in count(1):
        # One byte past either limit is enough to know it is passed.
        raw = source.readline(min(MAX_LINE_BYTES, MAX_FILE_BYTES - offset) + 1)
        if not raw:
            return
        if offset + len(raw) > MAX_FILE_BYTES:
            raise _too_large("goes over", option)
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            raise click.BadParameter(
                f"line {number} is longer than {MAX_LINE_BYTES} bytes; "
                "expected one START/END per line",
                param_hint=option,
            )
        yield number, _decoded(raw, number, offset, option)
        offset += len(raw)


def _refuse_a_large_regular_file(source: BinaryIO, option: str) -> None:
    """A regular file tells its size, so a large one is refused before a byte is read.
    Pipes, stdin and devices do not (and /proc files say 0): reading bounds those."""
    try:
        status = os.fstat(source.fileno())
    except OSError:  # an in-memory stream has no descriptor (UnsupportedOperation)
        return
    if stat.S_ISREG(status.st_mode) and status.st_size > MAX_FILE_BYTES:
        raise _too_large(f"is {status.st_size} bytes, over", option)


def _too_large(what: str, option: str) -> click.BadParameter:
    return click.BadParameter(
        f"the file {what} the limit of {MAX_FILE_BYTES} bytes "
        f"(a publication is at most {MAX_BATCH_SLOTS} START/END lines)",
        param_hint=option,
    )


def _decoded(raw: bytes, number: int, offset: int, option: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.BadParameter(
            f"line {number} is not UTF-8: byte 0x{raw[exc.start]:02x} at offset "
            f"{offset + exc.start} of the file; save it as UTF-8",
            param_hint=option,
        ) from None


def _shown(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}..."


as_moment = _converted(parse_moment, "an ISO-8601 date-time")
as_slot_range = _converted(parse_range, "START/END in ISO-8601")
as_cursor = _converted(ShowcaseCursor.decode, "a showcase cursor")
