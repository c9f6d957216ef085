"""The search_path a URL's `options` ask for, read as the server reads them: what each
session sets again in every transaction, where a pooler may have dropped the options."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slot_expiration.options.database_url import (
    quoted_identifier,
    search_path_of,
    url_from_parts,
    with_search_path,
)

URL = "postgresql://u@db/cal"


def _with_options(options: str) -> str:
    return url_from_parts({"user": "u", "host": "db", "dbname": "cal", "options": options})


@pytest.mark.parametrize(
    ("options", "search_path"),
    [
        ("-c search_path=booking", "booking"),
        ("-csearch_path=booking", "booking"),
        ("--search_path=booking", "booking"),
        ("--search-path=booking", "booking"),  # a dash reads as an underscore
        ("-c SEARCH_PATH=booking", "booking"),  # names are case-insensitive
        ("-c search_path=a -c work_mem=8MB -csearch_path=b", "b"),  # the last one wins
        ("-c search_path=my\\ book,\\ public", "my book, public"),  # escaped spaces
        ("-c work_mem=8MB", None),
        ("-c", None),
        ("", None),
        ("-c search_pathx=a", None),
    ],
)
def test_the_search_path_is_read_from_the_options_as_postgresql_reads_them(
    options: str, search_path: str | None
) -> None:
    assert search_path_of(_with_options(options)) == search_path


def test_without_options_in_the_url_pgoptions_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGOPTIONS", "-c search_path=from_env")

    assert search_path_of(URL) == "from_env"


def test_a_url_without_a_search_path_asks_for_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PGOPTIONS", raising=False)

    assert search_path_of(URL) is None


# Schema names as --schema takes them: any text without NUL, at most 63 bytes.
SCHEMA_NAMES = st.text(
    st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), min_size=1
).filter(lambda name: len(name.encode()) <= 63)


@given(schema=SCHEMA_NAMES)
def test_the_schema_option_is_read_back_as_its_quoted_name_whatever_it_holds(
    schema: str,
) -> None:
    assert search_path_of(with_search_path(URL, schema)) == quoted_identifier(schema)
