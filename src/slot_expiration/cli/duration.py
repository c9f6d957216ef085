"""Durations as an operator types them: `90s`, `30m`, `2h`, `1d`, or parts of them in that
order (`1h30m`), whole numbers only, read strictly: anything else is refused, in one line
that says what is expected and never quotes what was typed."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Final

import click

from slot_expiration.pause import span_text

# Each unit at most once, in this order, each a whole number of ASCII digits.
_PARTS: Final = re.compile("".join(f"(?:([0-9]{{1,6}}){unit})?" for unit in "dhms"))
_UNITS: Final = ("days", "hours", "minutes", "seconds")


def parse_duration(text: str, longest: timedelta) -> timedelta:
    """`text` as a duration above 0 and at most `longest`; ValueError otherwise."""
    found = _PARTS.fullmatch(text)
    if not text or found is None:
        raise ValueError(expected(longest))
    lasting = timedelta(
        **{unit: int(part) for unit, part in zip(_UNITS, found.groups(), strict=True) if part}
    )
    if not timedelta(0) < lasting <= longest:
        raise ValueError(expected(longest))
    return lasting


def expected(longest: timedelta) -> str:
    return (
        "a duration such as 90s, 30m, 2h or 1h30m (whole numbers of d, h, m and s, in that "
        f"order), above 0 and at most {span_text(longest)}"
    )


def duration_option(
    longest: timedelta,
) -> Callable[[click.Context, click.Parameter, str | None], timedelta | None]:
    """A click callback: the option's duration (None when not given), or a usage error (exit
    2) in one line."""

    def convert(ctx: click.Context, param: click.Parameter, value: str | None) -> timedelta | None:
        if value is None:
            return None
        try:
            return parse_duration(value, longest)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None

    return convert
