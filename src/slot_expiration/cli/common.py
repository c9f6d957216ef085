"""What every command shares: loading its options model, and turning the failures a user
can cause into one line on stderr."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic_settings import BaseSettings

from slot_expiration.cli.errors import ExitCode, fail, reject
from slot_expiration.db import ErrorFamily, SchemaMissingError, StoreError, TransactionLimits
from slot_expiration.db.errors import Remedy
from slot_expiration.db.session import milliseconds
from slot_expiration.domain import SlotRuleError
from slot_expiration.options import (
    ENV_PREFIX,
    DatabaseOptions,
    OptionsError,
    load_settings,
)
from slot_expiration.options.database_url import redact_typed, redact_url
from slot_expiration.options.settings import DEFAULT_LOCK_TIMEOUT_SECONDS
from slot_expiration.schema.grants import GrantRefusedError
from slot_expiration.schema.location import slot_table_elsewhere
from slot_expiration.telemetry.endpoints import EndpointError
from slot_expiration.telemetry.traces import TracingConfigError

T = TypeVar("T")
D = TypeVar("D", bound=BaseSettings)
# An operator's command (a quarantine retry or park, a pause, a resume) is a few short
# statements: it must not wait long behind a cycle's lock.
COMMAND_LIMITS = TransactionLimits(
    statement_timeout_ms=10_000, lock_timeout_ms=milliseconds(DEFAULT_LOCK_TIMEOUT_SECONDS)
)


def settings_from(model: type[D], *, environment: bool = True, **given: Any) -> D:
    """A command's validated options model from its flags and (unless told not to) its
    own variables; a wrong value is a usage error (its message never quotes a value)."""
    try:
        return load_settings(model, environment=environment, **given)
    except OptionsError as exc:
        fail(str(exc), ExitCode.USAGE)


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
    try:
        return action()
    except SlotRuleError as exc:
        reject(exc.code, str(exc))
    except GrantRefusedError as exc:
        fail(str(exc), ExitCode.USAGE)
    except StoreError as exc:
        fail(store_failure(located(exc, options), url), ExitCode.FAILURE)
    except asyncio.CancelledError:
        fail("interrupted", ExitCode.INTERRUPTED)
    except TracingConfigError as exc:
        fail(str(exc), ExitCode.USAGE)
    except EndpointError as exc:
        fail(str(exc), ExitCode.FAILURE)


def located(exc: StoreError, options: DatabaseOptions) -> StoreError:
    """A missing table that migrate would create, unless availability_slots lives in a
    schema the search_path misses: then that, and how to point at it."""
    if not isinstance(exc, SchemaMissingError) or exc.remedy is Remedy.CALENDAR:
        return exc
    if options.database_url is None:  # a private server of its own (the benchmark's)
        return exc
    return slot_table_elsewhere(options.require_database_url()) or exc


def store_failure(exc: StoreError, url: str) -> str:
    """The one line for a store error: where, what, its SQLSTATE, and whether waiting
    may help (transient) or a person must act (misconfigured)."""
    code = f" (SQLSTATE {exc.sqlstate})" if exc.sqlstate else ""
    if exc.connecting:
        where = redact_url(url) if url else "the database"
        return f"cannot connect to the database ({where}): {exc}{code}"
    if exc.family is ErrorFamily.TRANSIENT:
        return f"database error, transient{code}: {exc}"
    return f"{exc}{code}"


def with_typed_secrets_redacted(message: str) -> str:
    """A message that quotes what the user typed (click's usage errors quote an unknown
    argument or a value outside a choice), each URL given on the command line or in one
    of our variables shown as redact_url rebuilds it (whole, never a secret), and any other
    text naming a secret parameter (`sslpassword=...`) not shown at all."""
    given = [value for name, value in os.environ.items() if name.startswith(ENV_PREFIX)]
    # `--option=value` carries the value after the first '='.
    typed = [part for arg in sys.argv[1:] for part in (arg, arg.partition("=")[2])]
    # The longest first: a URL inside a longer argument goes with that argument. Quoted
    # as repr() quotes it too (click's "{value!r} is not a valid boolean", say).
    for text in sorted({t for t in [*given, *typed] if t}, key=len, reverse=True):
        shown = redact_typed(text)
        if shown != text:
            message = message.replace(text, shown).replace(repr(text)[1:-1], repr(shown)[1:-1])
    return message
