"""The commands' options: one typed model per command."""

from slot_expiration.options.database_url import redact_url
from slot_expiration.options.settings import (
    ENV_PREFIX,
    MIN_INTERVAL_SECONDS,
    CycleOptions,
    DatabaseOptions,
    DemoOptions,
    LogFormat,
    MigrateOptions,
    MigrationSqlOptions,
    OptionsError,
    StatusOptions,
    SynchronousCommit,
    UiOptions,
    Unit,
    WorkerOptions,
    flag_name,
    load_options,
    load_settings,
)

__all__ = [
    "ENV_PREFIX",
    "MIN_INTERVAL_SECONDS",
    "CycleOptions",
    "DatabaseOptions",
    "DemoOptions",
    "LogFormat",
    "MigrateOptions",
    "MigrationSqlOptions",
    "OptionsError",
    "StatusOptions",
    "SynchronousCommit",
    "UiOptions",
    "Unit",
    "WorkerOptions",
    "flag_name",
    "load_options",
    "load_settings",
    "redact_url",
]
