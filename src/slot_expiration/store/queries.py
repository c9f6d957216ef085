"""Loads the named statements of the store's `.sql` files.

`queries.sql` (the worker's statements) and its siblings are the single home
of the product's SQL; code refers to a statement by name, unique across the
files, and never assembles SQL text.
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
            raise ValueError(f"bad statement name {name!r}")
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        statement = "\n".join(lines).strip()
        if name in queries:
            raise ValueError(f"statement {name!r} is defined twice")
        # The text comes from our own package file, never from input.
        queries[name] = statement
    return queries


@cache
def load_queries() -> dict[str, LiteralString]:
    """Every named statement of every `.sql` file of the store package."""
    queries: dict[str, LiteralString] = {}
    sources = sorted(files("slot_expiration.store").iterdir(), key=lambda entry: entry.name)
    for source in (entry for entry in sources if entry.name.endswith(".sql")):
        for name, statement in parse_queries(source.read_text(encoding="utf-8")).items():
            if name in queries:
                raise ValueError(f"statement {name!r} is defined in two .sql files")
            queries[name] = statement
    return queries


def query(name: str) -> LiteralString:
    """The statement called `name` in one of the store's .sql files."""
    try:
        return load_queries()[name]
    except KeyError:
        raise KeyError(f"no statement named {name!r} in the store's .sql files") from None
