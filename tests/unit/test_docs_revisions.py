"""Every schema revision the documentation names follows the code: each one said to be the
newest (`schema already at NNNN`, `schema migrated from ... to NNNN`, `NNNN (the newest)`) is
the head the code migrates to, and every migration it names by number exists."""

from __future__ import annotations

import re
from pathlib import Path

from slot_expiration.schema.version import HEAD_REVISION
from tests.support.artifact import REPOSITORY, installed_package

DOCUMENTS = sorted(
    [
        REPOSITORY / "README.md",
        *(REPOSITORY / "docs").rglob("*.md"),
        *(REPOSITORY / "deploy").rglob("*.y*ml"),
    ]
)
# Where a document says which revision is the newest, as the commands print it.
SAYS_HEAD = [
    re.compile(r"schema already at (\d{4})"),
    re.compile(r"schema migrated from \S+ to (\d{4})"),
    re.compile(r"\b(\d{4}) \(the newest\)"),
    re.compile(r"schema at (\d{4}): repaired"),
]
NAMES_A_MIGRATION = re.compile(r"\b[Mm]igrations? `?(\d{4})`?")


def _revisions() -> set[str]:
    versions = installed_package() / "schema" / "migrations" / "versions"
    return {path.name[:4] for path in versions.glob("[0-9][0-9][0-9][0-9]_*.py")}


def heads_said(text: str) -> list[str]:
    return [found for pattern in SAYS_HEAD for found in pattern.findall(text)]


def _where(path: Path) -> str:
    return str(path.relative_to(REPOSITORY))


def test_every_revision_a_document_calls_the_newest_is_the_codes_head() -> None:
    stale = [
        f"{_where(path)}: {said}"
        for path in DOCUMENTS
        for said in heads_said(path.read_text(encoding="utf-8"))
        if said != HEAD_REVISION
    ]

    assert not stale, f"the newest revision is {HEAD_REVISION}: {stale}"


def test_every_migration_a_document_names_exists() -> None:
    known = _revisions()

    unknown = [
        f"{_where(path)}: {number}"
        for path in DOCUMENTS
        for number in NAMES_A_MIGRATION.findall(path.read_text(encoding="utf-8"))
        if number not in known
    ]

    assert HEAD_REVISION in known
    assert not unknown, unknown


def test_the_phrases_that_name_the_newest_revision_are_found() -> None:
    """A document saying 0006 where the head is 0007 (as four places did) is caught."""
    text = (
        '"schema migrated from empty to 0006, adopting ..."\n'
        'again: "schema already at 0006: nothing to do"\n'
        "schema         0006 (the newest)\n"
    )

    assert heads_said(text) == ["0006", "0006", "0006"]
