"""The store's own errors: psycopg's are translated once, here, at the boundary."""

from __future__ import annotations

from uuid import UUID

import psycopg

# SQLSTATE classes for which the database rejected one row's transition:
# data exceptions (22), integrity constraint violations (23) and errors
# raised by a trigger or function (P0001, raise_exception).
_ROW_REJECTION_CLASSES = ("22", "23")
_RAISE_EXCEPTION = "P0001"
_UNDEFINED_TABLE = "42P01"


class SlotStoreError(Exception):
    """Base of every failure coming out of the slot store."""


class StoreUnavailableError(SlotStoreError):
    """The database cannot be reached, refused us, or went away mid-cycle.

    The batch rolls back whole; the next cycle retries it.
    """


class StoreConnectError(StoreUnavailableError):
    """No session could be opened: server down, wrong host or port, login refused."""


class CommitInDoubtError(StoreUnavailableError):
    """COMMIT was sent but no answer came before the connection had to be dropped:
    the server may or may not have committed. Either way each row changed at most
    once; only the count of the batch is unknown."""


class NotQuarantinedError(SlotStoreError):
    """Slots an operator named are not in the quarantine (expired meanwhile, or a typo)."""

    def __init__(self, slot_ids: list[str]) -> None:
        super().__init__(f"not in the quarantine, nothing changed: {', '.join(slot_ids)}")


class SchemaMissingError(SlotStoreError):
    """The database answers but the worker's tables do not exist yet (or not all)."""

    def __init__(self) -> None:
        super().__init__(
            "the schema is missing or out of date: run `slot-expiration migrate` first"
        )


class RowRejectedError(SlotStoreError):
    """The database refused a row's transition (constraint, trigger, data error)."""

    def __init__(self, message: str, sqlstate: str, slot_id: UUID | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.slot_id = slot_id


def is_row_rejection(sqlstate: str | None) -> bool:
    """Whether a SQLSTATE means 'this row is poison' rather than 'the database failed'."""
    if sqlstate is None:
        return False
    return sqlstate[:2] in _ROW_REJECTION_CLASSES or sqlstate == _RAISE_EXCEPTION


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an error message: libpq's are multi-line."""
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


def translate(exc: psycopg.Error, slot_id: UUID | None = None) -> SlotStoreError:
    """Map a driver error to the store's typed error (the one place that knows psycopg's)."""
    message = first_line(exc)
    if is_row_rejection(exc.sqlstate):
        assert exc.sqlstate is not None  # narrowed by is_row_rejection
        return RowRejectedError(message, exc.sqlstate, slot_id)
    if exc.sqlstate == _UNDEFINED_TABLE:
        return SchemaMissingError()
    return StoreUnavailableError(message)
