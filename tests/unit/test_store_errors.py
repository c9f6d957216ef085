"""The store's error boundary: which SQLSTATEs are poison rows, and how psycopg's map to ours."""

from __future__ import annotations

from uuid import uuid4

import psycopg
import pytest

from slot_expiration.store.errors import (
    RowRejectedError,
    SchemaMissingError,
    SlotStoreError,
    StoreUnavailableError,
    first_line,
    is_row_rejection,
    translate,
)


def _psycopg_error(sqlstate: str, message: str = "the server said no") -> psycopg.Error:
    """A driver error carrying `sqlstate`, built without a database (sqlstate is per class)."""
    error = psycopg.errors.lookup(sqlstate)(message)
    assert error.sqlstate == sqlstate
    return error


@pytest.mark.parametrize(
    ("sqlstate", "rejects_the_row"),
    [
        ("22001", True),  # string_data_right_truncation
        ("22012", True),  # division_by_zero
        ("22P02", True),  # invalid_text_representation
        ("23502", True),  # not_null_violation
        ("23505", True),  # unique_violation
        ("23514", True),  # check_violation
        ("P0001", True),  # raise_exception (a trigger said no)
        ("08006", False),  # connection_failure
        ("40001", False),  # serialization_failure
        ("40P01", False),  # deadlock_detected
        ("57014", False),  # query_canceled (statement_timeout)
        ("57P01", False),  # admin_shutdown
        ("42P01", False),  # undefined_table
        ("P0002", False),  # no_data_found: not raise_exception
        ("", False),
        (None, False),
    ],
)
def test_is_row_rejection_is_true_only_for_classes_22_23_and_p0001(
    sqlstate: str | None, rejects_the_row: bool
) -> None:
    assert is_row_rejection(sqlstate) is rejects_the_row


@pytest.mark.parametrize("sqlstate", ["22012", "23505", "23514", "P0001"])
def test_translate_maps_a_row_rejection_to_row_rejected_error_with_sqlstate_and_slot_id(
    sqlstate: str,
) -> None:
    slot_id = uuid4()

    error = translate(_psycopg_error(sqlstate, "slot refuses to expire\nCONTEXT: trigger"), slot_id)

    assert isinstance(error, RowRejectedError)
    assert error.sqlstate == sqlstate
    assert error.slot_id == slot_id
    assert str(error) == "slot refuses to expire"


def test_translate_of_a_row_rejection_without_a_slot_id_carries_none() -> None:
    error = translate(_psycopg_error("23505"))

    assert isinstance(error, RowRejectedError)
    assert error.slot_id is None


def test_translate_maps_undefined_table_to_schema_missing_error_pointing_at_migrate() -> None:
    error = translate(_psycopg_error("42P01", 'relation "availability_slots" does not exist'))

    assert isinstance(error, SchemaMissingError)
    assert "migrate" in str(error)


@pytest.mark.parametrize("sqlstate", ["08006", "40001", "57014", "57P01", "53300"])
def test_translate_maps_an_infrastructure_error_to_store_unavailable_error(sqlstate: str) -> None:
    error = translate(_psycopg_error(sqlstate, "terminating connection\nHINT: retry"), uuid4())

    assert isinstance(error, StoreUnavailableError)
    assert not isinstance(error, RowRejectedError)
    assert str(error) == "terminating connection"


def test_translate_maps_a_driver_error_without_sqlstate_to_store_unavailable_error() -> None:
    error = translate(psycopg.OperationalError("connection is lost"))

    assert isinstance(error, StoreUnavailableError)
    assert str(error) == "connection is lost"


@pytest.mark.parametrize("sqlstate", ["23505", "42P01", "08006"])
def test_every_translated_error_is_a_slot_store_error(sqlstate: str) -> None:
    assert isinstance(translate(_psycopg_error(sqlstate)), SlotStoreError)


def test_first_line_keeps_only_the_first_non_empty_line_stripped() -> None:
    error = RuntimeError("\n   \n  connection refused  \nIs the server running?\n")

    assert first_line(error) == "connection refused"


def test_first_line_of_an_empty_message_is_the_error_type_name() -> None:
    assert first_line(TimeoutError()) == "TimeoutError"
    assert first_line(RuntimeError(" \n ")) == "RuntimeError"
