"""Fixtures of the unit tier."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from slot_expiration.options import ENV_PREFIX


@pytest.fixture
def no_worker_environment() -> Iterator[None]:
    """The test sees no SLOT_EXPIRATION_* variable but the ones it sets itself."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith(ENV_PREFIX):
                patch.delenv(name)
        yield
