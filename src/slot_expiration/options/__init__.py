"""The worker's options."""

from slot_expiration.options.settings import (
    ENV_PREFIX,
    DatabaseOptions,
    LogFormat,
    OptionsError,
    WorkerOptions,
    load_options,
    load_settings,
    redact_url,
    url_secrets,
)

__all__ = [
    "ENV_PREFIX",
    "DatabaseOptions",
    "LogFormat",
    "OptionsError",
    "WorkerOptions",
    "load_options",
    "load_settings",
    "redact_url",
    "url_secrets",
]
