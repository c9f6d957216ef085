"""The named statements of the product's .sql files (each concern's, beside its code): all
loaded, none empty, names checked, each read whole in its own file."""

from __future__ import annotations

import re
from importlib.resources import files

import pytest

from slot_expiration.db.statements import SQL_PACKAGES, load_queries, parse_queries, query

# What one cycle runs, in its order (expiry.store, schema.location, the quarantine's apart).
RUN_BY_A_CYCLE = (
    "slot_table_identity",
    "cycle_clock",
    "worker_problems",
    "expire_batch",
    "lock_batch",
    "check_constraints_immediately",
    "expire_slot",
    "count_backlog_capped",
)


SQL_FILES = (
    ("slot_expiration.history", "history.sql"),
    ("slot_expiration.schema", "migrate.sql"),
    ("slot_expiration.schema", "grants.sql"),
    ("slot_expiration.quarantine", "quarantine.sql"),
    ("slot_expiration.pause", "pause.sql"),
    ("slot_expiration.expiry", "expiry.sql"),
    ("slot_expiration.schema", "contract.sql"),
    ("slot_expiration.db", "session.sql"),
    ("slot_expiration.slots", "slots.sql"),
    ("slot_expiration.status", "status.sql"),
)
# The statements that pick, count or explain the due slots: one selection for all.
SELECTION_STATEMENTS = ("expire_batch", "lock_batch", "explain_pick")


def _names_declared_in(place: tuple[str, str]) -> list[str]:
    package, file_name = place
    text = files(package).joinpath(file_name).read_text(encoding="utf-8")
    return re.findall(r"^--\s*name:\s*(\S+)", text, flags=re.MULTILINE)


def test_every_statement_named_in_every_sql_file_is_loaded() -> None:
    declared = [name for file_name in SQL_FILES for name in _names_declared_in(file_name)]

    for file_name in SQL_FILES:
        assert _names_declared_in(file_name), f"{file_name} declares no statement"
    assert sorted(load_queries()) == sorted(declared)


def test_the_packages_hold_no_other_sql_file_than_those_listed() -> None:
    found = [
        (package, entry.name)
        for package in SQL_PACKAGES
        for entry in files(package).iterdir()
        if entry.name.endswith(".sql")
    ]

    assert sorted(found) == sorted(SQL_FILES)


def test_statement_names_are_unique_across_the_sql_files() -> None:
    declared = [name for file_name in SQL_FILES for name in _names_declared_in(file_name)]

    assert len(declared) == len(set(declared))


def test_no_statement_is_written_twice_under_two_names() -> None:
    """A second copy drifts from the first: one statement, run by every store that needs it."""
    by_text: dict[str, list[str]] = {}
    for name, statement in load_queries().items():
        by_text.setdefault(" ".join(statement.split()), []).append(name)

    assert [names for names in by_text.values() if len(names) > 1] == []


@pytest.mark.parametrize("name", SELECTION_STATEMENTS)
def test_every_statement_of_the_selection_holds_the_one_pick_fragment_verbatim(name: str) -> None:
    """The pick is written once (expiry.sql, fragment pick_due_slots): a statement
    that picked, counted or explained the due slots its own way would fail here."""
    pick = parse_queries("-- name: probe\n-- include: pick_due_slots\n", _expiry_sql())["probe"]

    assert pick in query(name)
    assert "s.status = 'Available' AND s.start_at <= %(as_of)s" in pick


def test_the_skipped_count_reads_the_same_predicate_as_the_pick() -> None:
    predicate = parse_queries("-- name: probe\n-- include: due_slot_predicate\n", _expiry_sql())[
        "probe"
    ]

    for name in ("expire_batch", "lock_batch"):
        assert query(name).count(predicate) == 2  # the pick and the count


def _expiry_sql() -> str:
    return files("slot_expiration.expiry").joinpath("expiry.sql").read_text(encoding="utf-8")


@pytest.mark.parametrize(("package", "file_name"), SQL_FILES)
def test_every_statement_reads_whole_in_its_own_file(package: str, file_name: str) -> None:
    """No include crosses files: each file's statements expand from its own fragments."""
    text = files(package).joinpath(file_name).read_text(encoding="utf-8")

    statements = parse_queries(text)

    assert statements
    assert all(statements[name] == query(name) for name in statements)


def test_parse_queries_expands_an_included_fragment_of_any_given_text() -> None:
    statements = "-- name: uses\nSELECT 1\nWHERE\n    -- include: shared\n;\n"
    fragments = "-- fragment: shared\n-- why\nx = 1\n"

    assert parse_queries(statements, fragments) == {"uses": "SELECT 1\nWHERE\nx = 1\n;"}


def test_parse_queries_rejects_an_include_of_an_unknown_fragment() -> None:
    with pytest.raises(ValueError, match="nowhere"):
        parse_queries("-- name: uses\n-- include: nowhere\n")


def test_parse_queries_rejects_fragments_that_include_each_other() -> None:
    text = (
        "-- fragment: a\n-- include: b\n-- fragment: b\n-- include: a\n-- name: x\n-- include: a\n"
    )

    with pytest.raises(ValueError, match="cycle"):
        parse_queries(text)


@pytest.mark.parametrize("name", sorted(load_queries()))
def test_every_loaded_statement_is_non_empty_sql_without_comment_lines(name: str) -> None:
    statement = load_queries()[name]

    assert statement.strip()
    assert not any(line.lstrip().startswith("--") for line in statement.splitlines())
    assert "-- name:" not in statement


@pytest.mark.parametrize("name", RUN_BY_A_CYCLE)
def test_every_statement_a_cycle_runs_exists(name: str) -> None:
    assert query(name).strip()


def test_query_of_an_unknown_name_raises_key_error_naming_it() -> None:
    with pytest.raises(KeyError, match="no_such_statement"):
        query("no_such_statement")


def test_parse_queries_splits_the_text_into_named_statements() -> None:
    text = "-- preamble\n\n-- name: first\nSELECT 1;\n\n-- name: second\nSELECT 2;\n"

    assert parse_queries(text) == {"first": "SELECT 1;", "second": "SELECT 2;"}


def test_parse_queries_ignores_the_preamble_before_the_first_name() -> None:
    text = "SELECT 'not a statement';\n-- name: only\nSELECT 1;\n"

    assert parse_queries(text) == {"only": "SELECT 1;"}


def test_parse_queries_strips_comment_lines_but_keeps_the_sql_around_them() -> None:
    text = (
        "-- name: commented\n"
        "-- what this does\n"
        "SELECT id\n"
        "    -- an indented comment\n"
        "FROM availability_slots;\n"
    )

    assert parse_queries(text) == {"commented": "SELECT id\nFROM availability_slots;"}


def test_parse_queries_rejects_a_name_defined_twice() -> None:
    text = "-- name: twice\nSELECT 1;\n-- name: other\nSELECT 2;\n-- name: twice\nSELECT 3;\n"

    with pytest.raises(ValueError, match="twice"):
        parse_queries(text)


def test_parse_queries_of_a_text_without_names_is_empty() -> None:
    assert parse_queries("-- nothing here\nSELECT 1;\n") == {}
