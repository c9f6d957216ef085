"""The worker's options."""

from slot_expiration.options.settings import (
    ENV_PREFIX,
    LogFormat,
    OptionsError,
    WorkerOptions,
    load_options,
    redact_url,
    url_secrets,
)

__all__ = [
    "ENV_PREFIX",
    "LogFormat",
    "OptionsError",
    "WorkerOptions",
    "load_options",
    "redact_url",
    "url_secrets",
]
