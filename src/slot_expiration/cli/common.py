"""What every command shares: options that read SLOT_EXPIRATION_*, loading them, and
turning the failures a user can cause into one line on stderr."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from slot_expiration.cli.errors import ExitCode, fail, reject
from slot_expiration.domain import SlotRuleError
from slot_expiration.embedded import EmbeddedPostgresError
from slot_expiration.loop import CycleBudgetExceededError
from slot_expiration.options import (
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
from slot_expiration.store import SlotStoreError, StoreConnectError, StoreUnavailableError
from slot_expiration.telemetry.endpoints import EndpointError
from slot_expiration.telemetry.traces import TracingConfigError

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
D = TypeVar("D", bound=DatabaseOptions)


def env_option(name: str, help_text: str, value_type: Any = str) -> Callable[[F], F]:
    """An option that also reads SLOT_EXPIRATION_<NAME>, shown in --help.

    Click only parses the type here; ranges and the URL are checked once, by
    the options object, so flags and environment obey the same rules.
    """
    env = f"{ENV_PREFIX}{name.upper()}"
    flag = "--" + name.replace("_", "-")
    return click.option(flag, name, type=value_type, envvar=env, show_envvar=True, help=help_text)


database_url_option = env_option("database_url", "PostgreSQL URL: postgresql://user@host/db")
batch_size_option = env_option("batch_size", "Rows per batch, 1..10000. [default: 500]", int)
max_cycle_option = env_option(
    "max_cycle_seconds", "Budget of one cycle; past it the batch is rolled back. [default: 30]",
    float,
)  # fmt: skip
max_batches_option = env_option(
    "max_batches_per_cycle",
    "Drain mode: batches per cycle, each its own transaction, within the cycle budget; "
    "0 = until the backlog is empty. [default: 1]",
    int,
)
batch_pause_option = env_option(
    "batch_pause_seconds",
    "Drain mode: the pause after each batch before the next, leaving the database to "
    "the bookings; 0..60, 0 = none. [default: 0]",
    float,
)
lock_timeout_option = env_option(
    "lock_timeout_seconds",
    "How long a statement may wait for a lock (a migration's table lock, say) before the "
    "cycle fails. [default: 2]",
    float,
)
poison_backoff_option = env_option(
    "poison_backoff_seconds",
    "A row the database rejects is retried after this long, the wait doubling per failure. "
    "[default: 300]",
    float,
)
poison_backoff_max_option = env_option(
    "poison_backoff_max_seconds", "The longest wait before a rejected row is retried. "
    "[default: 3600]", float,
)  # fmt: skip
prepared_statements_option = click.option(
    "--prepared-statements/--no-prepared-statements",
    "prepared_statements",
    default=None,
    envvar=f"{ENV_PREFIX}PREPARED_STATEMENTS",
    show_envvar=True,
    help="Prepare the worker's statements on the server (saves planning in long drains). "
    "Leave off behind a pooler in transaction mode older than pgbouncer 1.21. [default: off]",
)
log_format_option = env_option(
    "log_format",
    "Logs on stderr: one JSON object per line, or console lines. [default: json]",
    click.Choice([f.value for f in LogFormat], case_sensitive=False),
)


def cycle_options(command: F) -> F:
    """The options of every command that runs cycles (`once`, `run`)."""
    for option in reversed(
        (
            database_url_option,
            batch_size_option,
            max_batches_option,
            batch_pause_option,
            max_cycle_option,
            lock_timeout_option,
            poison_backoff_option,
            poison_backoff_max_option,
            prepared_statements_option,
            log_format_option,
        )
    ):
        command = option(command)
    return command


def options_from(**given: Any) -> WorkerOptions:
    """The worker's validated options from flags and environment; a wrong one is a
    usage error."""
    return _usage_error_if_wrong(lambda: load_options(**given))


def settings_from(model: type[D], **given: Any) -> D:
    """Another command's validated options (SlotOptions, say), the same way."""
    return _usage_error_if_wrong(lambda: load_settings(model, **given))


def _usage_error_if_wrong(load: Callable[[], T]) -> T:
    try:
        return load()
    except OptionsError as exc:
        fail(str(exc), ExitCode.USAGE, input_secrets())


def required_url(options: DatabaseOptions) -> str:
    try:
        return options.require_database_url()
    except OptionsError as exc:
        fail(str(exc), ExitCode.USAGE)


def guarded(action: Callable[[], T], options: DatabaseOptions) -> T:
    """Run a command's work; a failure it can explain becomes one line and exit 1, a
    rule rejection one line starting with its code and exit 3."""
    url = options.database_url.get_secret_value() if options.database_url else ""
    try:
        return action()
    except SlotRuleError as exc:
        reject(exc.code, str(exc))
    except StoreConnectError as exc:
        where = redact_url(url) if url else "the database"
        fail(f"cannot connect to the database ({where}): {exc}", ExitCode.FAILURE, url_secrets(url))
    except StoreUnavailableError as exc:
        fail(f"database error: {exc}", ExitCode.FAILURE, url_secrets(url))
    except asyncio.CancelledError:
        fail("interrupted: the cycle was rolled back", ExitCode.INTERRUPTED)
    except TracingConfigError as exc:
        fail(str(exc), ExitCode.USAGE)
    except (SlotStoreError, CycleBudgetExceededError, EmbeddedPostgresError, EndpointError) as exc:
        fail(str(exc), ExitCode.FAILURE, url_secrets(url))


def input_secrets() -> list[str]:
    """Passwords in any URL the user gave, on the command line or in any of our variables
    (a URL pasted into the wrong option is echoed back by its error otherwise)."""
    given = [value for name, value in os.environ.items() if name.startswith(ENV_PREFIX)]
    # `--option=value` carries the value after the first '='.
    typed = [part for arg in sys.argv for part in (arg, arg.partition("=")[2])]
    return [secret for text in [*given, *typed] if "://" in text for secret in url_secrets(text)]
