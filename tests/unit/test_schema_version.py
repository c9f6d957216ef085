"""The worker knows the newest schema revision without loading Alembic."""

from __future__ import annotations

import subprocess
import sys

from slot_expiration.store.migrate import head_revision
from slot_expiration.store.schema_version import HEAD_REVISION


def test_head_revision_constant_is_the_head_alembic_finds() -> None:
    # A new migration must move HEAD_REVISION too, or readiness would never be ready.
    assert head_revision() == HEAD_REVISION


def test_the_cli_loads_neither_alembic_nor_the_otlp_exporter_until_asked() -> None:
    probe = (
        "import sys, slot_expiration.cli.app; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'alembic', 'sqlalchemy', "
        "'jinja2'} or m.startswith(('opentelemetry.sdk', 'opentelemetry.exporter'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()

    assert loaded == "[]"
