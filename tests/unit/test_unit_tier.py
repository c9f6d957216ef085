"""The unit tier is pure, so it runs in seconds on the source tree (`./scripts/test --fast`):
none of its modules imports the benchmark, and a test here that starts a process fails."""

from __future__ import annotations

import ast
import asyncio
import subprocess
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parent


def _imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    return names | {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }


def test_no_unit_test_imports_the_benchmark() -> None:
    importing = [
        path.name
        for path in sorted(UNIT.rglob("*.py"))
        if any(name.split(".")[0] == "benchmarks" for name in _imported(path))
    ]

    assert importing == [], "the benchmark's tests belong to tests/bench"


def test_a_unit_test_that_starts_a_process_fails() -> None:
    with pytest.raises(pytest.fail.Exception, match="starts no process"):
        subprocess.run(["true"], check=False)


async def test_a_unit_test_that_starts_an_asyncio_subprocess_fails() -> None:
    with pytest.raises(pytest.fail.Exception, match="starts no process"):
        await asyncio.create_subprocess_exec("true")
