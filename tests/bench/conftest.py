"""The benchmark's own tier: its arithmetic, its repository on the suite's PostgreSQL and the
quick run as a smoke test. The benchmark is not the product: the full suite runs this tier
(against the installed wheel, which the benchmark measures); `./scripts/test --fast` does not."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A conftest's hooks see every item of the session, not only this folder's.
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.bench)
