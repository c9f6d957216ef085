"""What every command shares: loading its options model, and turning the failures a user
can cause into one line on stderr."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from slot_expiration.cli.errors import ExitCode, fail, reject
from slot_expiration.domain import SlotRuleError
from slot_expiration.options import (
    ENV_PREFIX,
    DatabaseOptions,
    OptionsError,
    load_settings,
    redact_url,
    url_secrets,
)
from slot_expiration.store import ErrorFamily, SlotStoreError
from slot_expiration.store.privileges import GrantRefusedError
from slot_expiration.telemetry.endpoints import EndpointError
from slot_expiration.telemetry.traces import TracingConfigError

T = TypeVar("T")
D = TypeVar("D", bound=DatabaseOptions)


def settings_from(model: type[D], *, environment: bool = True, **given: Any) -> D:
    """A command's validated options model from its flags and (unless told not to) its
    own variables; a wrong value is a usage error."""
    try:
        return load_settings(model, environment=environment, **given)
    except OptionsError as exc:
        fail(str(exc), ExitCode.USAGE, input_secrets())


def required_url(options: DatabaseOptions) -> str:
    try:
        return options.require_database_url()
    except OptionsError as exc:
        fail(str(exc), ExitCode.USAGE)


def guarded(action: Callable[[], T], options: DatabaseOptions) -> T:
    """Run a command's work; a failure it can explain becomes one line and exit 1, a
    refusal of its input exit 2, a rule rejection one line starting with its code and
    exit 3, an interruption exit 130."""
    url = options.database_url.get_secret_value() if options.database_url else ""
    secrets = url_secrets(url)
    try:
        return action()
    except SlotRuleError as exc:
        reject(exc.code, str(exc))
    except GrantRefusedError as exc:
        fail(str(exc), ExitCode.USAGE, secrets)
    except SlotStoreError as exc:
        fail(store_failure(exc, url), ExitCode.FAILURE, secrets)
    except asyncio.CancelledError:
        fail("interrupted", ExitCode.INTERRUPTED)
    except TracingConfigError as exc:
        fail(str(exc), ExitCode.USAGE)
    except EndpointError as exc:
        fail(str(exc), ExitCode.FAILURE, secrets)


def store_failure(exc: SlotStoreError, url: str) -> str:
    """The one line for a store error: where, what, its SQLSTATE, and whether waiting
    may help (transient) or a person must act (misconfigured)."""
    code = f" (SQLSTATE {exc.sqlstate})" if exc.sqlstate else ""
    if exc.connecting:
        where = redact_url(url) if url else "the database"
        return f"cannot connect to the database ({where}): {exc}{code}"
    if exc.family is ErrorFamily.TRANSIENT:
        return f"database error, transient{code}: {exc}"
    return f"{exc}{code}"


def input_secrets() -> list[str]:
    """Passwords in any URL the user gave, on the command line or in any of our variables
    (a URL pasted into the wrong option is echoed back by its error otherwise)."""
    given = [value for name, value in os.environ.items() if name.startswith(ENV_PREFIX)]
    # `--option=value` carries the value after the first '='.
    typed = [part for arg in sys.argv for part in (arg, arg.partition("=")[2])]
    return [secret for text in [*given, *typed] if "://" in text for secret in url_secrets(text)]
