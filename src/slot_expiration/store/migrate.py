"""Applies the Alembic migrations shipped inside the package."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy.exc
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from slot_expiration.store.errors import StoreUnavailableError, first_line

_SCRIPT_LOCATION = "slot_expiration.store:migrations"


@dataclass(frozen=True, slots=True)
class MigrationOutcome:
    before: str | None
    after: str | None

    @property
    def changed(self) -> bool:
        return self.before != self.after


def sqlalchemy_url(database_url: str) -> str:
    """The same database, addressed through SQLAlchemy's psycopg 3 dialect."""
    scheme, sep, rest = database_url.partition("://")
    if not sep or scheme not in ("postgresql", "postgres"):
        raise ValueError("database URL must start with postgresql://")
    return f"postgresql+psycopg://{rest}"


def _config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", _SCRIPT_LOCATION)
    config.attributes["database_url"] = database_url
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(_config("postgresql://unused")).get_current_head()


def current_revision(database_url: str) -> str | None:
    engine = create_engine(sqlalchemy_url(database_url), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


def upgrade(database_url: str) -> MigrationOutcome:
    """Bring the schema to the newest revision; a no-op when it is already there."""
    try:
        before = current_revision(database_url)
        command.upgrade(_config(database_url), "head")
        return MigrationOutcome(before=before, after=current_revision(database_url))
    except sqlalchemy.exc.DBAPIError as exc:
        cause = exc.orig if exc.orig is not None else exc
        raise StoreUnavailableError(first_line(cause)) from exc
