"""Applies the Alembic migrations shipped inside the package."""

from __future__ import annotations

from dataclasses import dataclass

import alembic.util
import psycopg
import sqlalchemy.exc
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine
from sqlalchemy.pool import NullPool

from slot_expiration.store.errors import SlotStoreError, first_line, translate
from slot_expiration.store.schema_version import VERSION_TABLE
from slot_expiration.store.session import ApplicationName, connect_sync

_SCRIPT_LOCATION = "slot_expiration.store:migrations"


class MigrationError(SlotStoreError):
    """Alembic refused: an unknown revision in our history table, say."""


@dataclass(frozen=True, slots=True)
class MigrationOutcome:
    before: str | None
    after: str | None

    @property
    def changed(self) -> bool:
        return self.before != self.after


def _config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", _SCRIPT_LOCATION)
    config.attributes["database_url"] = database_url
    return config


def head_revision() -> str | None:
    """The newest revision as Alembic finds it (the worker uses schema_version.HEAD_REVISION)."""
    return ScriptDirectory.from_config(_config("postgresql://unused")).get_current_head()


def engine_for(database_url: str) -> Engine:
    """A SQLAlchemy engine whose connections psycopg opens from our URL as it is.

    SQLAlchemy's own URL parser knows fewer forms than libpq (multi-host lists,
    an empty port with ?port=); letting psycopg connect accepts every URL the
    worker itself accepts.
    """
    # Raised from the creator, our error reaches the caller unwrapped by SQLAlchemy.
    return create_engine(
        "postgresql+psycopg://",
        creator=lambda: connect_sync(database_url, ApplicationName.ADMIN),
        poolclass=NullPool,
    )


def current_revision(database_url: str) -> str | None:
    engine = engine_for(database_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
            return context.get_current_revision()
    finally:
        engine.dispose()


def upgrade(database_url: str) -> MigrationOutcome:
    """Bring the schema to the newest revision; a no-op when it is already there."""
    try:
        before = current_revision(database_url)
        command.upgrade(_config(database_url), "head")
        return MigrationOutcome(before=before, after=head_revision())
    except sqlalchemy.exc.DBAPIError as exc:
        if isinstance(exc.orig, psycopg.Error):
            raise translate(exc.orig) from exc
        raise SlotStoreError(first_line(exc)) from exc
    except psycopg.Error as exc:
        raise translate(exc) from exc
    except alembic.util.CommandError as exc:
        raise MigrationError(f"migration failed: {first_line(exc)}") from exc


def downgrade(database_url: str, revision: str) -> None:
    """Take the schema back to `revision` (a release rolled back)."""
    try:
        command.downgrade(_config(database_url), revision)
    except alembic.util.CommandError as exc:
        raise MigrationError(f"migration failed: {first_line(exc)}") from exc
