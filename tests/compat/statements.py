"""The store's statements of the latest release (frozen in released/), and whether a
database's schema still resolves them: the check that migrations only add.

A release keeps running while a newer one migrates (rolling deploys, rollbacks),
so every table, column, function and type its statements name must survive
every later migration. PostgreSQL itself is the judge: each statement is
prepared (parsed and analyzed, never run) on a database at head; a name it
cannot resolve is a migration that dropped or renamed something the release uses.
Preparing cannot see one thing that breaks only when a statement runs: a new
NOT NULL column without a default, which the release's INSERTs do not write;
`unwritten_columns` checks that from the catalog.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import psycopg
from psycopg.pq import DiagnosticField, ExecStatus

from slot_expiration.db.statements import parse_queries

RELEASED = Path(__file__).parent / "released"
# SQLSTATEs of a name the schema no longer has.
UNRESOLVED: Final = {
    "42P01": "undefined table",
    "42703": "undefined column",
    "42883": "undefined function",
    "42704": "undefined object",
    "3F000": "undefined schema",
}
# Only these statements are analyzed when prepared; utility ones (SET, GRANT, BEGIN)
# are not, and psycopg.sql templates ({role}, {table}) are filled in at run time.
_ANALYZED: Final = ("SELECT", "WITH", "INSERT", "UPDATE", "DELETE", "VALUES", "EXPLAIN")
_TEMPLATE = re.compile(r"\{[a-z_]+\}")
_PARAMETER = re.compile(r"%\((?P<name>[a-z_][a-z0-9_]*)\)s")
_INSERT = re.compile(
    r"\bINSERT\s+INTO\s+(?P<table>\w+)(?:\s+AS\s+\w+)?\s*\((?P<columns>[^)]*)\)",
    re.IGNORECASE,
)
# The columns an INSERT must name: NOT NULL, and nothing fills them in.
_REQUIRED_COLUMNS = """
SELECT attname::text FROM pg_attribute
WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped
  AND attnotnull AND NOT atthasdef AND attidentity = '' AND attgenerated = ''
ORDER BY attnum
"""


def released_version() -> str:
    return (RELEASED / "RELEASE").read_text(encoding="utf-8").strip()


def released_statements() -> dict[str, str]:
    """The released statements that PostgreSQL analyzes when it prepares them."""
    texts = [path.read_text(encoding="utf-8") for path in sorted(RELEASED.glob("*.sql"))]
    return {
        name: statement
        for name, statement in parse_queries(*texts).items()
        if statement.lstrip().split(None, 1)[0].upper() in _ANALYZED
        and not _TEMPLATE.search(statement)
    }


def positional(statement: str) -> str:
    """psycopg's `%(name)s` parameters as the server's `$n` (one number per name)."""
    numbers: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        return f"${numbers.setdefault(match['name'], len(numbers) + 1)}"

    return _PARAMETER.sub(number, statement).replace("%%", "%")


def unresolved(url: str, statements: Mapping[str, str]) -> dict[str, str]:
    """{statement name: the server's error} for each statement naming something the
    database's schema does not have (any other refusal is not this check's business)."""
    found: dict[str, str] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for name, statement in statements.items():
            result = conn.pgconn.prepare(b"", positional(statement).encode())
            if result.status == ExecStatus.COMMAND_OK:
                continue
            sqlstate = (result.error_field(DiagnosticField.SQLSTATE) or b"").decode()
            if sqlstate in UNRESOLVED:
                message = (result.error_message or b"").decode(errors="replace")
                found[name] = f"{UNRESOLVED[sqlstate]}: {message.strip().splitlines()[0]}"
    return found


def unwritten_columns(url: str, statements: Mapping[str, str]) -> dict[str, str]:
    """{statement name: the columns it leaves out} for each INSERT that no longer names
    every column its table requires (NOT NULL, no default, neither identity nor generated)."""
    found: dict[str, str] = {}
    with psycopg.connect(url) as conn:
        for name, statement in statements.items():
            if (insert := _INSERT.search(statement)) is None:
                continue
            written = {column.strip() for column in insert["columns"].split(",")}
            rows = conn.execute(_REQUIRED_COLUMNS, [insert["table"]]).fetchall()
            missing = [str(row[0]) for row in rows if row[0] not in written]
            if missing:
                found[name] = f"{insert['table']} requires {', '.join(missing)}"
    return found
