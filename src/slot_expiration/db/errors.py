"""The store's one error language: every driver error is translated here, once.

Every store error carries the SQLSTATE the database gave (or, for a refused
login, the one its message stands for) and belongs to one family:

- *transient*: time may cure it (connection lost, a server shutting down or
  starting up, serialization failures and deadlocks, lock and statement
  timeouts, a read-only server after a failover, too many connections). The
  batch rolls back whole and the next tick retries it.
- *misconfigured*: only a person can cure it (authentication, a missing
  privilege, a missing table or column, an unknown database, an unsupported
  feature). The worker refuses to start; while it runs, it turns unready and
  counts and alerts the failure instead of retrying silently.
- *row rejected*: the database refused one row's transition (a constraint, a
  trigger, a data error): that row is poison, the rest of its batch commits.

SQLSTATE_FAMILIES below is the whole classification, by full code or by class.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import StrEnum
from typing import Final
from urllib.parse import quote
from uuid import UUID

import psycopg


class ErrorFamily(StrEnum):
    TRANSIENT = "transient"
    MISCONFIGURED = "misconfigured"
    ROW_REJECTED = "row_rejected"


_T, _M, _R = ErrorFamily.TRANSIENT, ErrorFamily.MISCONFIGURED, ErrorFamily.ROW_REJECTED

# By full five-character code first, then by its two-character class.
SQLSTATE_FAMILIES: Final[Mapping[str, ErrorFamily]] = {
    "22": _R,  # data exception: a value the column or a cast refuses
    "23": _R,  # integrity constraint violation: check, unique, foreign key, not null
    "P0001": _R,  # raise_exception: a trigger refused the row
    "08": _T,  # connection exception: lost, refused, never established
    "40": _T,  # transaction rollback: serialization failure, deadlock detected
    "53": _T,  # insufficient resources: too many connections, disk full, out of memory
    "55P03": _T,  # lock_not_available: lock_timeout
    "57": _T,  # operator intervention: statement_timeout, shutdown, cannot connect now
    "25006": _T,  # read_only_sql_transaction: a standby, after a failover
    "25P03": _T,  # idle_in_transaction_session_timeout
    "58": _T,  # system error: I/O on the server
    "XX": _T,  # internal error of the server
    "28": _M,  # invalid authorization: wrong password, no pg_hba.conf entry, unknown role
    "3D": _M,  # invalid catalog name: the database does not exist
    "3F": _M,  # invalid schema name
    "42": _M,  # access rule violation: permission denied, undefined table or column
    "0A": _M,  # feature not supported (by this server or pooler)
    "0L": _M,  # invalid grantor
    "0P": _M,  # invalid role specification
    "F0": _M,  # configuration file error
}
# A driver error without SQLSTATE is the client's side of a broken connection.
DEFAULT_FAMILY: Final = _T

INSUFFICIENT_PRIVILEGE: Final = "42501"
UNDEFINED_TABLE: Final = "42P01"
UNDEFINED_COLUMN: Final = "42703"
UNDEFINED_FUNCTION: Final = "42883"
UNABLE_TO_CONNECT: Final = "08001"
LOCK_NOT_AVAILABLE: Final = "55P03"

# libpq reports no SQLSTATE when the server refuses a login: its FATAL message
# is all there is. These are the messages PostgreSQL sends (lc_messages C/en)
# and the SQLSTATE each stands for; no match is a connection failure (08001).
_LOGIN_REFUSALS: Final = (
    (re.compile(r"password authentication failed|no password supplied"), "28P01"),
    (re.compile(r"no pg_hba\.conf entry|role \".*\" does not exist"), "28000"),
    (re.compile(r"is not permitted to log in|authentication failed"), "28000"),
    (re.compile(r"database \".*\" does not exist"), "3D000"),
    (re.compile(r"permission denied for database"), INSUFFICIENT_PRIVILEGE),
    (re.compile(r"too many clients|remaining connection slots are reserved"), "53300"),
    (re.compile(r"the database system is (starting up|shutting down|in recovery)"), "57P03"),
    (re.compile(r"not yet accepting connections"), "57P03"),
)


def family_of(sqlstate: str | None) -> ErrorFamily:
    """The family of a SQLSTATE: by its full code, else its class, else transient."""
    if not sqlstate:
        return DEFAULT_FAMILY
    return SQLSTATE_FAMILIES.get(sqlstate) or SQLSTATE_FAMILIES.get(sqlstate[:2], DEFAULT_FAMILY)


def is_row_rejection(sqlstate: str | None) -> bool:
    """Whether a SQLSTATE means 'this row is poison' rather than 'the database failed'."""
    return sqlstate is not None and family_of(sqlstate) is ErrorFamily.ROW_REJECTED


class StoreError(Exception):
    """Base of every failure coming out of the store: a message, a SQLSTATE, a family.

    `connecting` tells that no session could be opened (the server, the
    network or the login refused), rather than a statement failing.
    """

    def __init__(
        self, message: str, sqlstate: str | None = None, *, connecting: bool = False
    ) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.connecting = connecting

    @property
    def family(self) -> ErrorFamily | None:
        """None for a refusal of the store's own (a slot not in the quarantine, say)."""
        return family_of(self.sqlstate) if self.sqlstate else None


class TransientStoreError(StoreError):
    """Time may cure it: the batch rolls back whole; the next tick retries it."""

    @property
    def family(self) -> ErrorFamily:
        return ErrorFamily.TRANSIENT


class CommitInDoubtError(TransientStoreError):
    """COMMIT was sent but no answer came before the connection had to be dropped:
    the server may or may not have committed. Either way each row changed at most
    once; only the count of the batch is unknown."""


class MisconfiguredStoreError(StoreError):
    """Only a person can cure it: a login, a privilege, a table or column is wrong. Who must
    act, where it is known: `remedy`."""

    def __init__(
        self,
        message: str,
        sqlstate: str | None = None,
        *,
        connecting: bool = False,
        remedy: Remedy | None = None,
    ) -> None:
        super().__init__(message, sqlstate, connecting=connecting)
        self.remedy = remedy

    @property
    def family(self) -> ErrorFamily:
        return ErrorFamily.MISCONFIGURED


class Remedy(StrEnum):
    """Who must act on a misconfiguration, and how: one word from the contract's problem
    kinds (contract.sql, worker_problems) to the error that carries it."""

    MIGRATE = "migrate"  # the worker's own schema missing or altered: `migrate` (re)creates it
    CALENDAR = "calendar"  # the calendar's availability_slots changed: restored by hand
    UNKNOWN_COLUMN = "unknown_column"  # a statement failed on a column; whose is not said
    GRANT = "grant"  # a privilege: `slot-expiration grant`
    ROW_SECURITY = "row_security"  # no policy shows every row: a permissive one, or BYPASSRLS
    RESTRICTIVE_POLICY = "restrictive_policy"  # one hides rows: exempt the role, or BYPASSRLS


_SCHEMA_ADVICE: Final = {
    Remedy.MIGRATE: "the schema is missing or out of date: run `slot-expiration migrate` first",
    Remedy.CALENDAR: "availability_slots no longer fits the calendar's table contract "
    "(`slot-expiration status` names what differs); restore it, migrate cannot",
    Remedy.UNKNOWN_COLUMN: "a column the worker needs is missing: `slot-expiration status` "
    "names it (`slot-expiration migrate` repairs the worker's own tables; the calendar's "
    "availability_slots must be restored by hand)",
}


class SchemaMissingError(MisconfiguredStoreError):
    """The database answers but a table or column the worker needs is missing: its own
    (or no schema at all: `migrate` creates or repairs it), or one of the calendar's
    table contract (the calendar's table changed: `migrate` cannot put it back)."""

    def __init__(
        self,
        detail: str | None = None,
        sqlstate: str = UNDEFINED_TABLE,
        remedy: Remedy | None = None,
    ) -> None:
        found = f"{detail}: " if detail else ""
        chosen = remedy or (
            Remedy.UNKNOWN_COLUMN if sqlstate == UNDEFINED_COLUMN else Remedy.MIGRATE
        )
        super().__init__(f"{found}{_SCHEMA_ADVICE[chosen]}", sqlstate, remedy=chosen)


class SlotTableElsewhereError(MisconfiguredStoreError):
    """The search_path finds no availability_slots, but another schema of the database
    holds one: the calendar's. Nothing may create a second one; only pointing every
    command at it helps."""

    def __init__(
        self, schemas: Sequence[str], search_path: str, role: str, *, changed: bool | None = None
    ) -> None:
        where = f"schema {schemas[0]}" if len(schemas) == 1 else f"schemas {', '.join(schemas)}"
        name = schemas[0] if len(schemas) == 1 else "SCHEMA"
        super().__init__(
            f"availability_slots is not on the search_path ({search_path}) but in {where}: "
            + ways_to_point_at(name, role, quoted=len(schemas) > 1)
            + ("; nothing changed" if changed is False else ""),
            UNDEFINED_TABLE,
        )
        self.schemas = tuple(schemas)


class WrongSlotTableError(MisconfiguredStoreError):
    """The search_path finds an availability_slots other than the one the worker adopted
    (or than the one --schema names): every statement would act on that other table.
    Refused before any statement touched it."""


def ways_to_point_at(schema: str, role: str, *, quoted: bool = False) -> str:
    """How to point every command at `schema`: the option, the URL, or the role."""
    identifier = schema if not quoted and _plain_identifier(schema) else f'"{schema}"'
    return (
        f"point every command at it with --schema {schema} (SLOT_EXPIRATION_SCHEMA), or the "
        f"URL's options=-csearch_path%3D{quote(identifier, safe='')}, or ALTER ROLE "
        f"{role} SET search_path = {identifier}"
    )


def _plain_identifier(name: str) -> bool:
    """Whether PostgreSQL reads `name` unquoted as itself (lower case, no odd characters)."""
    return re.fullmatch(r"[a-z_][a-z0-9_$]*", name) is not None


class ContractMismatchError(MisconfiguredStoreError):
    """An existing availability_slots that `migrate` cannot adopt: each way it differs
    from the table contract (or what migrate lacks to add the worker's objects).
    Raised before anything changed."""

    def __init__(self, problems: tuple[str, ...]) -> None:
        super().__init__(
            "the existing availability_slots cannot be adopted, nothing changed: "
            + "; ".join(problems)
        )
        self.problems = problems


class MigrationError(StoreError):
    """Alembic refused, the database is at a revision this release does not know, or a
    repair would lose what only a person may decide to lose."""


class NotQuarantinedError(StoreError):
    """Slots an operator named are not in the quarantine (expired meanwhile, or a typo)."""

    def __init__(self, slot_ids: list[str]) -> None:
        super().__init__(f"not in the quarantine, nothing changed: {', '.join(slot_ids)}")


class RowRejectedError(StoreError):
    """The database refused a row's transition (constraint, trigger, data error)."""

    def __init__(self, message: str, sqlstate: str, slot_id: UUID | None = None) -> None:
        super().__init__(message, sqlstate)
        self.slot_id = slot_id

    @property
    def family(self) -> ErrorFamily:
        return ErrorFamily.ROW_REJECTED


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an error message: libpq's are multi-line."""
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


@contextmanager
def translated(slot_id: UUID | None = None, *, connecting: bool = False) -> Iterator[None]:
    """The driver's errors raised in the block as the store's typed errors: the one place
    they are translated. A row rejection names `slot_id`, the row it was about; a failure
    while `connecting` is read as a refused or impossible login."""
    try:
        yield
    except psycopg.Error as exc:
        raise (translate_connect(exc) if connecting else translate(exc, slot_id)) from exc


def translate(exc: psycopg.Error, slot_id: UUID | None = None) -> StoreError:
    """A failed statement's driver error as the store's typed error."""
    return _typed(first_line(exc), exc.sqlstate, slot_id=slot_id)


def translate_connect(exc: psycopg.Error) -> StoreError:
    """A failed connection attempt as the store's typed error (see _LOGIN_REFUSALS)."""
    message = first_line(exc).removeprefix("connection failed: ")
    sqlstate = exc.sqlstate or login_refusal_sqlstate(str(exc))
    return _typed(message, sqlstate, connecting=True)


def login_refusal_sqlstate(message: str) -> str:
    """The SQLSTATE a refused login's message stands for; 08001 for any other failure."""
    for pattern, sqlstate in _LOGIN_REFUSALS:
        if pattern.search(message):
            return sqlstate
    return UNABLE_TO_CONNECT


def _typed(
    message: str, sqlstate: str | None, *, slot_id: UUID | None = None, connecting: bool = False
) -> StoreError:
    family = family_of(sqlstate)
    if family is ErrorFamily.ROW_REJECTED and sqlstate is not None:
        return RowRejectedError(message, sqlstate, slot_id)
    if family is ErrorFamily.MISCONFIGURED:
        if sqlstate in (UNDEFINED_TABLE, UNDEFINED_COLUMN) and not connecting:
            return SchemaMissingError(message, sqlstate)
        return MisconfiguredStoreError(message, sqlstate, connecting=connecting)
    return TransientStoreError(message, sqlstate, connecting=connecting)
