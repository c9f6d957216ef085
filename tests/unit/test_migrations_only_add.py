"""Migrations only add: no upgrade drops, renames, retypes or deletes anything, but for
the few operations listed here with the reason they are safe.

A release keeps running on the schema of a newer one (rolling deploys, rollbacks:
src/slot_expiration/schema/migrations/README.md). This scan reads each migration's
source, every function but `downgrade`, for Alembic operations and SQL that take
something away. tests/integration/test_previous_release.py checks the same rule
from the other side, with the previous release's own statements.
"""

from __future__ import annotations

import ast
import re
from importlib.resources import files
from typing import Final

DESTRUCTIVE_OPERATIONS: Final = frozenset(
    {
        "drop_table",
        "drop_column",
        "drop_index",
        "drop_constraint",
        "rename_table",
        "alter_column",
        "drop_table_comment",
        "drop_column_comment",
    }
)
DESTRUCTIVE_SQL: Final = re.compile(
    r"\b(DROP|RENAME|TRUNCATE|DELETE|RESET)\b|\bALTER\s+COLUMN\b.*\bTYPE\b", re.IGNORECASE
)
# (revision, the operation's source): why it takes nothing a release uses.
ALLOWED: Final = {
    # An interrupted build of the migration's own temporary index.
    ("0004", "op.execute(f'DROP INDEX CONCURRENTLY IF EXISTS {BUILDING}')"),
    # The swap: the old index goes only once its replacement of the same name is built.
    (
        "0004",
        "op.drop_index(INDEX, table_name=TABLE, postgresql_concurrently=True, if_exists=True)",
    ),
    ("0004", "op.execute(f'ALTER INDEX {BUILDING} RENAME TO {INDEX}')"),
    # An INVALID index of the worker's own shape (a build cut short: no query can use it)
    # goes once its replacement of the same name is built.
    ("0004", "op.drop_index(INDEX, table_name=TABLE, postgresql_concurrently=True)"),
    # A partition's INVALID index of the worker's shape (a build cut short), built again.
    ("0004", "op.execute(f'DROP INDEX CONCURRENTLY IF EXISTS {index}')"),
    # An INVALID slot-context index (a build cut short), built again under its name.
    ("0003", "op.drop_index(name, table_name=TABLE, postgresql_concurrently=True)"),
    # An INVALID index of the history's own (a build cut short), built again under its name.
    ("0007", "op.execute(f'DROP INDEX CONCURRENTLY IF EXISTS {index}')"),
    # 0006's two checks of the history go as the relaxed ones that replace them come, in
    # one statement (no release names a check; every row the old ones admit, the new do).
    (
        "0009",
        "op.execute(f'ALTER TABLE {HISTORY} ADD CONSTRAINT {name} CHECK ({holds}) NOT VALID, "
        "DROP CONSTRAINT IF EXISTS {replaces}')",
    ),
    # ... and where a repair's replay of 0006 put an old one back beside its replacement.
    ("0009", "op.execute(f'ALTER TABLE {HISTORY} DROP CONSTRAINT {replaces}')"),
    # An INVALID index of the history's own (a build cut short), built again under its name.
    ("0009", "op.execute(f'DROP INDEX CONCURRENTLY IF EXISTS {FAULT_INDEX}')"),
}


def _migrations() -> dict[str, ast.Module]:
    versions = files("slot_expiration.schema").joinpath("migrations", "versions")
    modules = {}
    for entry in versions.iterdir():
        if entry.name.endswith(".py"):
            modules[entry.name[:4]] = ast.parse(entry.read_text(encoding="utf-8"))
    return modules


def _upgrade_code(module: ast.Module) -> list[ast.AST]:
    """Every function of the module but downgrade (upgrade and the helpers it calls)."""
    return [
        node
        for node in module.body
        if isinstance(node, ast.FunctionDef) and node.name != "downgrade"
    ]


def _destructive(module: ast.Module) -> set[str]:
    found = set()
    for function in _upgrade_code(module):
        for node in ast.walk(function):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if not (isinstance(node.func.value, ast.Name) and node.func.value.id == "op"):
                continue
            source = ast.unparse(node)
            destructive_sql = node.func.attr == "execute" and DESTRUCTIVE_SQL.search(source)
            if node.func.attr in DESTRUCTIVE_OPERATIONS or destructive_sql:
                found.add(source)
    return found


def test_no_migration_takes_away_what_a_release_uses_beyond_the_allowed_few() -> None:
    found = {
        (revision, source)
        for revision, module in _migrations().items()
        for source in _destructive(module)
    }

    # Something new here: make it additive (README.md beside the migrations), or, if
    # it takes nothing a release uses, allow it above with the reason.
    assert found == ALLOWED


def test_the_scan_sees_a_drop_and_a_rename() -> None:
    careless = ast.parse(
        "def upgrade():\n"
        "    op.drop_column('availability_slots', 'note')\n"
        "    op.execute('ALTER TABLE slot_expiration_failures RENAME COLUMN message TO m')\n"
        "def downgrade():\n"
        "    op.drop_table('t')\n"
    )

    assert _destructive(careless) == {
        "op.drop_column('availability_slots', 'note')",
        "op.execute('ALTER TABLE slot_expiration_failures RENAME COLUMN message TO m')",
    }
