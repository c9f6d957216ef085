"""Fixtures of the end-to-end tier: URLs with a password, a port nobody listens on."""

from __future__ import annotations

import socket

import pytest

from tests.e2e.command import with_password


@pytest.fixture
def secret_url(database_url: str) -> str:
    """The test database's URL with a password in it (the server trusts; it is ignored)."""
    return with_password(database_url)


@pytest.fixture
def closed_port() -> int:
    """A local TCP port nothing listens on: bound by us a moment ago, then released."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
