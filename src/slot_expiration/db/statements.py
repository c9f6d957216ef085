"""Loads the named statements of the product's `.sql` files.

Each concern keeps its SQL in `.sql` files beside its code (SQL_PACKAGES): the single
home of the product's SQL; code refers to a statement by name, unique across the files,
and never assembles SQL text.

A file may also define fragments (`-- fragment: NAME`): SQL that several of ITS
statements share, written once. A statement takes one in with a line
`-- include: NAME`, replaced when the file is loaded, so the selection of due slots is
the same text in every statement of expiry.sql that picks, counts or explains it. A
fragment never crosses files: each statement reads whole in the file that holds it.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files
from typing import LiteralString

_HEADER = re.compile(r"^-- (?P<kind>name|fragment):(?P<name>.*)$", re.MULTILINE)
_INCLUDE = re.compile(r"^[ \t]*-- include:[ \t]*(?P<name>\S+)[ \t]*$", re.MULTILINE)
_VALID_NAME = re.compile(r"[a-z][a-z0-9_]*")
# Where the product's .sql files are: each concern's beside its store.
SQL_PACKAGES = (
    "slot_expiration.db",
    "slot_expiration.expiry",
    "slot_expiration.quarantine",
    "slot_expiration.pause",
    "slot_expiration.history",
    "slot_expiration.status",
    "slot_expiration.slots",
    "slot_expiration.schema",
)
_MAX_INCLUDE_DEPTH = 4


def split_sql(text: str) -> list[tuple[str, str, str]]:
    """The (kind, name, body) of each statement and fragment of one file, in order."""
    parts = _HEADER.split(text)
    found = []
    # parts = [preamble, kind1, name1, body1, kind2, name2, body2, ...]
    for kind, raw_name, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        name = raw_name.strip()
        if not _VALID_NAME.fullmatch(name):
            raise ValueError(f"bad {kind} name {name!r}")
        found.append((kind, name, body))
    return found


def parse_queries(*texts: str) -> dict[str, LiteralString]:
    """{name: statement} of these texts: includes expanded, comment lines dropped.

    A statement may include a fragment of any of the texts given together: the product
    gives one file at a time (load_package_queries); the statements a release before
    this one froze (tests/compat) included fragments of other files.
    """
    entries = [entry for text in texts for entry in split_sql(text)]
    fragments: dict[str, str] = {}
    statements: dict[str, str] = {}
    for kind, name, body in entries:
        table = fragments if kind == "fragment" else statements
        if name in table:
            raise ValueError(f"{kind} {name!r} is defined twice")
        table[name] = body
    # The text comes from our own package files, never from input.
    return {name: _clean(_expand(body, fragments)) for name, body in statements.items()}


def _expand(body: str, fragments: dict[str, str], depth: int = 0) -> str:
    """`body` with each include replaced by its fragment, itself expanded (a few levels)."""
    if depth > _MAX_INCLUDE_DEPTH:
        raise ValueError("fragments include each other in a cycle")

    def fragment(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in fragments:
            raise ValueError(f"no fragment named {name!r}")
        return _clean(_expand(fragments[name], fragments, depth + 1))

    return _INCLUDE.sub(fragment, body)


def _clean(body: str) -> str:
    lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
    return "\n".join(lines).strip()


def sql_texts(*packages: str) -> list[str]:
    """The text of every `.sql` file of `packages`, in order of package, then of name."""
    return [
        entry.read_text(encoding="utf-8")
        for package in packages
        for entry in sorted(files(package).iterdir(), key=lambda entry: entry.name)
        if entry.name.endswith(".sql")
    ]


@cache
def load_package_queries(*packages: str) -> dict[str, LiteralString]:
    """Every named statement of every `.sql` file of `packages`, each file read on its own:
    a statement includes only fragments of its own file; a name is unique across them."""
    found: dict[str, LiteralString] = {}
    for text in sql_texts(*packages):
        for name, statement in parse_queries(text).items():
            if name in found:
                raise ValueError(f"statement {name!r} is defined twice")
            found[name] = statement
    return found


def load_queries() -> dict[str, LiteralString]:
    """Every named statement of the product."""
    return load_package_queries(*SQL_PACKAGES)


def query(name: str) -> LiteralString:
    """The statement called `name` in one of the product's .sql files."""
    try:
        return load_queries()[name]
    except KeyError:
        raise KeyError(f"no statement named {name!r} in the product's .sql files") from None
