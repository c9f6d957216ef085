"""What each part of the program loads, each read in a fresh interpreter: the commands' shared
error path knows nothing of the embedded server, the command line loads neither Alembic nor the
OTLP exporter until asked, nor aiohttp until an endpoint starts, and the store loads no benchmark
code."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.deploy


def _loaded_after(module: str) -> set[str]:
    probe = f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(done.stdout.split())


@pytest.mark.parametrize(
    "module", ["slot_expiration.cli.common", "slot_expiration.cli.worker_commands"]
)
def test_the_shared_error_path_does_not_load_the_embedded_server(module: str) -> None:
    loaded = _loaded_after(module)

    assert "slot_expiration.embedded" not in loaded
    assert "slot_expiration.embedded.postgres" not in loaded


def test_the_database_kernel_holds_only_the_products_persistence() -> None:
    loaded = _loaded_after("slot_expiration.db")

    assert not {name for name in loaded if name.startswith("benchmarks")}


def test_the_cli_loads_neither_alembic_nor_the_otlp_exporter_until_asked() -> None:
    loaded = _loaded_after("slot_expiration.cli.app")

    assert not {
        name
        for name in loaded
        if name.split(".")[0] in {"alembic", "sqlalchemy", "jinja2"}
        or name.startswith(("opentelemetry.sdk", "opentelemetry.exporter"))
    }


@pytest.mark.parametrize("module", ["slot_expiration.cli.app", "slot_expiration.worker"])
def test_aiohttp_is_loaded_only_when_an_endpoint_starts(module: str) -> None:
    # `once`, `status`, `migrate` and the rest serve nothing: aiohttp would be 11 MB of them.
    loaded = _loaded_after(module)

    assert "slot_expiration.telemetry.http_server" not in loaded
    assert not {name for name in loaded if name.split(".")[0] == "aiohttp"}
