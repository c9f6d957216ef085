"""Alembic environment: runs the migrations on the URL the caller put in the config."""

from alembic import context

from slot_expiration.store.migrate import engine_for
from slot_expiration.store.schema_version import VERSION_TABLE


def run_migrations_online() -> None:
    # The URL travels in attributes, not in the ini options, so a '%' in a
    # password is never taken for ConfigParser interpolation.
    engine = engine_for(context.config.attributes["database_url"])
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            transaction_per_migration=True,
            version_table=VERSION_TABLE,
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported: pass a database URL")
run_migrations_online()
