"""The store's one error language: every SQLSTATE class has its family (one table), and
psycopg's errors map to the store's typed errors carrying their SQLSTATE."""

from __future__ import annotations

from uuid import uuid4

import psycopg
import pytest

from slot_expiration.db.errors import (
    SQLSTATE_FAMILIES,
    ErrorFamily,
    MisconfiguredStoreError,
    RowRejectedError,
    SchemaMissingError,
    StoreError,
    TransientStoreError,
    family_of,
    first_line,
    is_row_rejection,
    login_refusal_sqlstate,
    translate,
    translate_connect,
)

T, M, R = ErrorFamily.TRANSIENT, ErrorFamily.MISCONFIGURED, ErrorFamily.ROW_REJECTED


def _psycopg_error(sqlstate: str, message: str = "the server said no") -> psycopg.Error:
    """A driver error carrying `sqlstate`, built without a database (sqlstate is per class)."""
    error = psycopg.errors.lookup(sqlstate)(message)
    assert error.sqlstate == sqlstate
    return error


# One row per SQLSTATE class the table names, with a real code of that class.
CLASSES = [
    ("22", "22012", R, "division_by_zero: a data exception"),
    ("23", "23514", R, "check_violation"),
    ("P0001", "P0001", R, "raise_exception: a trigger said no"),
    ("08", "08006", T, "connection_failure"),
    ("40", "40001", T, "serialization_failure"),
    ("40", "40P01", T, "deadlock_detected"),
    ("53", "53300", T, "too_many_connections"),
    ("55P03", "55P03", T, "lock_not_available: lock_timeout"),
    ("57", "57014", T, "query_canceled: statement_timeout"),
    ("57", "57P01", T, "admin_shutdown"),
    ("57", "57P03", T, "cannot_connect_now: starting up"),
    ("25006", "25006", T, "read_only_sql_transaction: a standby"),
    ("25P03", "25P03", T, "idle_in_transaction_session_timeout"),
    ("58", "58030", T, "io_error"),
    ("XX", "XX000", T, "internal_error"),
    ("28", "28P01", M, "invalid_password"),
    ("28", "28000", M, "invalid_authorization_specification: no pg_hba.conf entry"),
    ("3D", "3D000", M, "invalid_catalog_name: unknown database"),
    ("3F", "3F000", M, "invalid_schema_name"),
    ("42", "42501", M, "insufficient_privilege"),
    ("42", "42P01", M, "undefined_table"),
    ("42", "42703", M, "undefined_column"),
    ("0A", "0A000", M, "feature_not_supported"),
    ("0L", "0L000", M, "invalid_grantor"),
    ("0P", "0P000", M, "invalid_role_specification"),
    ("F0", "F0000", M, "config_file_error"),
]


@pytest.mark.parametrize(("key", "sqlstate", "family", "what"), CLASSES)
def test_each_sqlstate_class_of_the_table_has_its_family(
    key: str, sqlstate: str, family: ErrorFamily, what: str
) -> None:
    assert SQLSTATE_FAMILIES[key] is family, what
    assert family_of(sqlstate) is family, what


def test_every_entry_of_the_table_is_tested_here() -> None:
    assert set(SQLSTATE_FAMILIES) == {key for key, *_ in CLASSES}


@pytest.mark.parametrize("sqlstate", [None, "", "55000", "P0002", "HV000"])
def test_a_code_the_table_does_not_name_is_transient(sqlstate: str | None) -> None:
    assert family_of(sqlstate) is T


@pytest.mark.parametrize(("key", "sqlstate", "family", "what"), CLASSES)
def test_translate_gives_the_typed_error_of_the_family_with_its_sqlstate(
    key: str, sqlstate: str, family: ErrorFamily, what: str
) -> None:
    error = translate(_psycopg_error(sqlstate, "first line\nDETAIL: more"), uuid4())

    expected = {R: RowRejectedError, T: TransientStoreError, M: MisconfiguredStoreError}[family]
    assert isinstance(error, expected), what
    assert error.family is family
    assert error.sqlstate == sqlstate
    assert str(error).startswith("first line")  # a missing schema adds "run migrate"
    assert not error.connecting


@pytest.mark.parametrize(
    ("sqlstate", "rejects_the_row"),
    [
        ("22001", True),
        ("22P02", True),
        ("23502", True),
        ("23505", True),
        ("P0001", True),
        ("08006", False),
        ("40001", False),
        ("42P01", False),
        ("P0002", False),
        ("", False),
        (None, False),
    ],
)
def test_is_row_rejection_is_true_only_for_classes_22_23_and_p0001(
    sqlstate: str | None, rejects_the_row: bool
) -> None:
    assert is_row_rejection(sqlstate) is rejects_the_row


def test_a_row_rejection_carries_the_slot_id_it_was_about() -> None:
    slot_id = uuid4()

    error = translate(_psycopg_error("23514", "slot refuses to expire\nCONTEXT: trigger"), slot_id)

    assert isinstance(error, RowRejectedError)
    assert (error.sqlstate, error.slot_id) == ("23514", slot_id)
    assert str(error) == "slot refuses to expire"


@pytest.mark.parametrize("sqlstate", ["42P01", "42703"])
def test_an_undefined_table_or_column_is_schema_missing_pointing_at_migrate(sqlstate: str) -> None:
    error = translate(_psycopg_error(sqlstate, 'column "version" does not exist'))

    assert isinstance(error, SchemaMissingError)
    assert error.family is M
    assert error.sqlstate == sqlstate
    assert "migrate" in str(error)


def test_a_driver_error_without_sqlstate_is_transient() -> None:
    error = translate(psycopg.OperationalError("connection is lost"))

    assert isinstance(error, TransientStoreError)
    assert str(error) == "connection is lost"


# libpq gives no SQLSTATE when a login is refused: the server's FATAL message stands for it.
LOGINS = [
    ('FATAL:  password authentication failed for user "calendar"', "28P01", M),
    ("fe_sendauth: no password supplied", "28P01", M),
    ('FATAL:  no pg_hba.conf entry for host "10.0.0.1", user "x"', "28000", M),
    ('FATAL:  role "nobody" does not exist', "28000", M),
    ('FATAL:  database "nodb" does not exist', "3D000", M),
    ('FATAL:  permission denied for database "calendar"', "42501", M),
    ("FATAL:  sorry, too many clients already", "53300", T),
    ("FATAL:  remaining connection slots are reserved for roles with SUPERUSER", "53300", T),
    ("FATAL:  the database system is starting up", "57P03", T),
    ("FATAL:  the database system is shutting down", "57P03", T),
    ("Connection refused\n\tIs the server running on that host", "08001", T),
    ("timeout expired", "08001", T),
]


@pytest.mark.parametrize(("message", "sqlstate", "family"), LOGINS)
def test_a_refused_login_is_classified_by_the_sqlstate_its_message_stands_for(
    message: str, sqlstate: str, family: ErrorFamily
) -> None:
    refused = psycopg.OperationalError(f"connection failed: connection to server failed: {message}")

    error = translate_connect(refused)

    assert login_refusal_sqlstate(message) == sqlstate
    assert (error.sqlstate, error.family, error.connecting) == (sqlstate, family, True)
    assert not str(error).startswith("connection failed:")


@pytest.mark.parametrize("sqlstate", ["23505", "42P01", "08006"])
def test_every_translated_error_is_a_store_error(sqlstate: str) -> None:
    assert isinstance(translate(_psycopg_error(sqlstate)), StoreError)


def test_an_error_of_the_store_itself_has_no_family() -> None:
    assert StoreError("statement returned 2 rows, expected 1").family is None


def test_first_line_keeps_only_the_first_non_empty_line_stripped() -> None:
    error = RuntimeError("\n   \n  connection refused  \nIs the server running?\n")

    assert first_line(error) == "connection refused"


def test_first_line_of_an_empty_message_is_the_error_type_name() -> None:
    assert first_line(TimeoutError()) == "TimeoutError"
    assert first_line(RuntimeError(" \n ")) == "RuntimeError"
