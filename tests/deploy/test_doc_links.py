"""Every link between the repository's documents lands: a relative link resolves from the
folder of the file that holds it (as a reader's viewer resolves it) to a file of the
repository, and an anchor names a heading of the document it points into."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.deploy

REPOSITORY = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted(
    path
    for pattern in ("*.md", "docs/**/*.md", "deploy/**/*.md", "src/**/*.md", "benchmarks/**/*.md")
    for path in REPOSITORY.glob(pattern)
)
_FENCE = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\]\(([^)\s]+)\)")  # [text](target) and ![alt](target)


def _prose(path: Path) -> str:
    """The document without its code blocks (a `# comment` there is no heading)."""
    return _FENCE.sub("", path.read_text(encoding="utf-8"))


def _anchors(path: Path) -> set[str]:
    """The anchors a viewer gives the document's headings: lower case, punctuation but
    hyphens and underscores dropped, each space a hyphen."""
    headings = re.findall(r"^#+ (.+?)\s*$", _prose(path), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def _relative_links(path: Path) -> list[str]:
    return [target for target in _LINK.findall(_prose(path)) if not re.match(r"[a-z]+:", target)]


def test_the_documents_are_found_and_link_to_one_another() -> None:
    names = {path.relative_to(REPOSITORY).as_posix() for path in DOCUMENTS}

    assert {"README.md", "docs/operations.md", "docs/runbooks/slot-expiration.md"} <= names
    assert sum(len(_relative_links(path)) for path in DOCUMENTS) > 50


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.relative_to(REPOSITORY).as_posix())
def test_each_relative_link_lands_on_a_file_and_a_heading(document: Path) -> None:
    broken = []
    for target in _relative_links(document):
        path, _, anchor = target.partition("#")
        destination = (document.parent / path).resolve() if path else document
        if not destination.is_relative_to(REPOSITORY) or not destination.exists():
            broken.append(f"{target}: no such file from {document.parent.name}/")
        elif anchor and destination.suffix == ".md" and anchor not in _anchors(destination):
            broken.append(f"{target}: no heading #{anchor} in {destination.name}")

    assert not broken, broken
