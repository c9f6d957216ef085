"""Reading what the `slots` commands are given: moments, START/END ranges, a file of
them, a page cursor. Anything malformed is a usage error (exit 2) naming the option."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TextIO, TypeVar

import click

from slot_expiration.slots import ShowcaseCursor, SlotRange

T = TypeVar("T")


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


def read_ranges(source: TextIO, option: str = "--from-file") -> list[SlotRange]:
    """One START/END per line; blank lines and lines starting with # are skipped."""
    ranges: list[SlotRange] = []
    for number, line in enumerate(source, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            ranges.append(parse_range(text))
        except ValueError:
            raise click.BadParameter(
                f"line {number}: {text!r} is not START/END in ISO-8601", param_hint=option
            ) from None
    return ranges


as_moment = _converted(parse_moment, "an ISO-8601 date-time")
as_slot_range = _converted(parse_range, "START/END in ISO-8601")
as_cursor = _converted(ShowcaseCursor.decode, "a showcase cursor")
