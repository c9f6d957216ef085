"""Fixtures of the unit tier, which is pure: no database, no process, no benchmark. A test that
starts a process (a tool such as promtool, the command, another interpreter) belongs to the
deploy or e2e tier; here it fails (`no_process`, below; tests/unit/test_unit_tier.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import NoReturn

import pytest

from slot_expiration.options import ENV_PREFIX

# Every way a test could start a process: subprocess (asyncio's subprocesses go through its
# Popen too), the os module's spawns and fork.
PROCESS_STARTERS = (
    (subprocess, "Popen"),
    (os, "fork"),
    (os, "posix_spawn"),
    (os, "posix_spawnp"),
    (os, "system"),
)


@pytest.fixture(autouse=True)
def no_process() -> Iterator[None]:
    """A unit test that starts a process fails, however the code under test catches errors."""

    def refuse(*args: object, **kwargs: object) -> NoReturn:
        pytest.fail("a unit test starts no process: it belongs to tests/deploy or tests/e2e")

    with pytest.MonkeyPatch.context() as patch:
        for module, name in PROCESS_STARTERS:
            patch.setattr(module, name, refuse)
        yield


@pytest.fixture
def no_worker_environment() -> Iterator[None]:
    """The test sees no SLOT_EXPIRATION_* variable but the ones it sets itself."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith(ENV_PREFIX):
                patch.delenv(name)
        yield
