"""The worker knows the newest schema revision without loading Alembic, and where a
database's revision stands against it."""

from __future__ import annotations

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory

from slot_expiration.schema.migrate import head_revision
from slot_expiration.schema.version import (
    HEAD_REVISION,
    SchemaPosition,
    ahead_of_release,
    position_of,
)


def test_head_revision_constant_is_the_head_alembic_finds() -> None:
    # A new migration must move HEAD_REVISION too, or readiness would never be ready.
    assert head_revision() == HEAD_REVISION


def test_revision_ids_are_consecutive_four_digit_numbers_from_0001() -> None:
    # How a release tells a schema ahead of it from one it does not know (schema_version).
    scripts = ScriptDirectory.from_config(_alembic_config())
    chain = [script.revision for script in reversed(list(scripts.walk_revisions()))]

    assert chain == [f"{n:04d}" for n in range(1, len(chain) + 1)]
    assert all(len(scripts.get_revision(r).nextrev) <= 1 for r in chain)  # no branches


@pytest.mark.parametrize(
    ("revision", "position"),
    [
        (None, SchemaPosition.NONE),
        ("0001", SchemaPosition.BEHIND),
        ("0004", SchemaPosition.BEHIND),
        ("0005", SchemaPosition.CURRENT),
        ("0006", SchemaPosition.AHEAD),
        ("0099", SchemaPosition.AHEAD),
        ("0000", SchemaPosition.UNKNOWN),
        ("00042", SchemaPosition.UNKNOWN),
        ("ae1027a6acf", SchemaPosition.UNKNOWN),
        ("", SchemaPosition.UNKNOWN),
    ],
)
def test_where_a_revision_stands_against_this_release(
    revision: str | None, position: SchemaPosition
) -> None:
    assert position_of(revision, head="0005") is position


def test_a_schema_ahead_is_said_with_both_revisions() -> None:
    assert ahead_of_release("0099", head="0005") == "schema ahead of this release (0099 > 0005)"


def _alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", "slot_expiration.schema:migrations")
    return config
