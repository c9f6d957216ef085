"""Loads the named statements of `queries.sql`.

The file is the single home of the product's SQL; code refers to a
statement by name and never assembles SQL text.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files
from typing import LiteralString

_NAME_LINE = re.compile(r"^-- name:(?P<name>.*)$", re.MULTILINE)
_VALID_NAME = re.compile(r"[a-z][a-z0-9_]*")


def parse_queries(text: str) -> dict[str, LiteralString]:
    """Split the file into {name: statement}; comment-only lines are dropped."""
    parts = _NAME_LINE.split(text)
    queries: dict[str, LiteralString] = {}
    # parts = [preamble, name1, body1, name2, body2, ...]
    for raw_name, body in zip(parts[1::2], parts[2::2], strict=True):
        name = raw_name.strip()
        if not _VALID_NAME.fullmatch(name):
            raise ValueError(f"bad statement name {name!r} in queries.sql")
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        statement = "\n".join(lines).strip()
        if name in queries:
            raise ValueError(f"statement {name!r} is defined twice in queries.sql")
        # The text comes from our own package file, never from input.
        queries[name] = statement
    return queries


@cache
def load_queries() -> dict[str, LiteralString]:
    text = files("slot_expiration.store").joinpath("queries.sql").read_text(encoding="utf-8")
    return parse_queries(text)


def query(name: str) -> LiteralString:
    """The statement called `name` in queries.sql."""
    try:
        return load_queries()[name]
    except KeyError:
        raise KeyError(f"no statement named {name!r} in queries.sql") from None
