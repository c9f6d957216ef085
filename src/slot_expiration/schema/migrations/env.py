"""Alembic environment: the migrations run on the URL the caller put in the config
(store.migrate.upgrade), or are written out as SQL (offline: `migrate --sql`).

Before adding a migration, read README.md beside this file: migrations only add.
"""

from alembic import context
from alembic.operations import Operations
from alembic.script import ScriptDirectory

from slot_expiration.schema import migration_context
from slot_expiration.schema.migrate import engine_for
from slot_expiration.schema.version import VERSION_TABLE


def run_migrations_online() -> None:
    attributes = context.config.attributes
    engine = engine_for(attributes["database_url"], migration_context.lock_timeout_ms())
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                transaction_per_migration=True,
                version_table=VERSION_TABLE,
            )
            if attributes.get(migration_context.REPLAY):
                replay_migrations(str(attributes[migration_context.REPLAY]))
                return
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


def replay_migrations(revision: str) -> None:
    """A repair (store.migrate): each migration up to `revision` runs again, in order,
    each in its own transaction as in an upgrade; each creates only what is missing
    (migration_context.replaying()). The version table is not touched."""
    migration = context.get_context()
    scripts = ScriptDirectory.from_config(context.config)
    with Operations.context(migration):
        for script in reversed(list(scripts.walk_revisions("base", revision))):
            with migration.begin_transaction(_per_migration=True):
                script.module.upgrade()


def run_migrations_offline() -> None:
    context.configure(
        url="postgresql+psycopg://",
        literal_binds=True,
        # Named parameters: a '%' in the SQL is written as it is, not doubled.
        dialect_opts={"paramstyle": "named"},
        transaction_per_migration=True,
        version_table=VERSION_TABLE,
    )
    # The session's lock_timeout, as engine_for sets it online.
    context.execute(f"SET lock_timeout = {migration_context.lock_timeout_ms()}")
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
