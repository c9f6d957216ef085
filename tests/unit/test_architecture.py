"""docs/architecture.md draws the real package graph: every arrow it draws is an import of the
code, every import of the code follows its arrows (directly or through packages below), and
no package reaches itself through others: no upward import, no circle."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import slot_expiration

PACKAGE = Path(slot_expiration.__file__).parent
# The ground floor: any package may import these (the picture draws two arrows to them).
GROUND = frozenset({"domain", "options"})
# The docs travel with the repository, not the wheel: read from the checkout.
ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def code_edges() -> set[tuple[str, str]]:
    """(importer, imported) for each import between two packages of slot_expiration."""
    edges: set[tuple[str, str]] = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).parts
        if len(parts) == 1:
            continue  # the package's own face and __main__
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module]
                if isinstance(node, ast.ImportFrom) and node.module
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                target = name.split(".")
                if target[0] == "slot_expiration" and len(target) > 1 and target[1] != parts[0]:
                    edges.add((parts[0], target[1]))
    return edges


def drawn_edges() -> set[tuple[str, str]]:
    """The arrows of the flowchart (`a --> b --> c` draws two)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    chart = text[text.index("```mermaid\nflowchart") : text.index("```\n", text.index("flowchart"))]
    edges: set[tuple[str, str]] = set()
    for line in chart.splitlines():
        names = [name.strip() for name in line.split("-->")]
        if len(names) > 1 and all(re.fullmatch(r"[a-z_]+", name) for name in names):
            edges.update(itertools.pairwise(names))
    return edges


def reach(edges: set[tuple[str, str]]) -> dict[str, set[str]]:
    """Each package and every package it reaches through the edges."""
    direct: dict[str, set[str]] = {}
    for source, target in edges:
        direct.setdefault(source, set()).add(target)
    reached: dict[str, set[str]] = {}
    for start, targets in direct.items():
        seen: set[str] = set()
        stack = list(targets)
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(direct.get(node, ()))
        reached[start] = seen
    return reached


def test_every_arrow_drawn_is_an_import_of_the_code() -> None:
    assert drawn_edges() - code_edges() == set()


def test_every_import_of_the_code_follows_the_arrows_drawn() -> None:
    reached = reach(drawn_edges())

    unfollowed = {(a, b) for a, b in code_edges() if b not in reached.get(a, set()) | GROUND}

    assert unfollowed == set()


def test_no_package_reaches_itself_no_circle() -> None:
    reached = reach(code_edges())

    assert sorted(package for package, seen in reached.items() if package in seen) == []
