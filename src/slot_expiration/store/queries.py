"""Loads the named statements of `queries.sql`.

The file is the single home of the product's SQL; code refers to a
statement by name and never assembles SQL text.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files
from typing import LiteralString

_NAME_LINE = re.compile(r"^-- name: (?P<name>[a-z_]+)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, LiteralString]:
    """Split the file into {name: statement}; comment-only lines are dropped."""
    parts = _NAME_LINE.split(text)
    queries: dict[str, LiteralString] = {}
    # parts = [preamble, name1, body1, name2, body2, ...]
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
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
