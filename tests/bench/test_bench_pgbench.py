"""pgbench's per-transaction log, and the booking script made from named statements."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.beside import booking_variables
from benchmarks.pgbench import (
    PgbenchSettings,
    between,
    booking_script,
    parse_log,
    parse_log_line,
    pgbench_argv,
    pgbench_statement,
)
from benchmarks.store import booking_statements

from slot_expiration.db.statements import query


def test_a_log_line_with_schedule_lag_gives_latency_lag_and_end_time() -> None:
    # client_id transaction_no time script_no time_epoch time_us schedule_lag
    logged = parse_log_line("3 117 2451 0 1764745200 250000 180")

    assert logged.client == 3
    assert logged.ok
    assert logged.latency_ms == pytest.approx(2.451)
    assert logged.lag_ms == pytest.approx(0.18)
    assert logged.ended_at == pytest.approx(1764745200.25)


def test_a_log_line_without_rate_has_no_lag() -> None:
    logged = parse_log_line("0 1 987 0 1764745200 5")

    assert logged.latency_ms == pytest.approx(0.987)
    assert logged.lag_ms is None


@pytest.mark.parametrize("word", ["skipped", "failed", "serialization", "deadlock"])
def test_a_transaction_pgbench_did_not_complete_has_no_latency(word: str) -> None:
    logged = parse_log_line(f"1 9 {word} 0 1764745200 0 1500")

    assert not logged.ok
    assert logged.status == word
    assert logged.latency_ms is None


def test_a_line_that_is_not_a_log_line_is_refused() -> None:
    with pytest.raises(ValueError, match="not a pgbench log line"):
        parse_log_line("latency average = 1.2 ms")


def test_parse_log_skips_blank_lines() -> None:
    assert len(parse_log(["0 1 900 0 1764745200 5 10", "", "1 1 950 0 1764745201 5 12\n"])) == 2


def test_between_keeps_the_transactions_that_ended_in_the_window() -> None:
    logged = parse_log([f"0 {n} 1000 0 {1764745200 + n} 0 0" for n in range(10)])

    kept = between(logged, 1764745202.0, 1764745205.0)

    assert [t.ended_at for t in kept] == [1764745202.0 + n for n in range(4)]


def test_statement_parameters_become_pgbench_variables() -> None:
    statement = "UPDATE t SET a = 1 WHERE id = %(slot_id)s AND tenant = %(tenant_id)s;"

    assert pgbench_statement(statement) == (
        "UPDATE t SET a = 1 WHERE id = :slot_id AND tenant = :tenant_id;"
    )


def test_a_statement_with_another_kind_of_parameter_is_refused() -> None:
    with pytest.raises(ValueError, match="parameter"):
        pgbench_statement("SELECT * FROM t WHERE id = %s")


def test_the_booking_script_picks_a_candidate_into_variables_then_books_in_a_transaction() -> None:
    script = booking_script(booking_statements(), candidates=5_000)

    lines = script.splitlines()
    assert lines[0] == "\\set n random(1, 5000)"
    assert lines[1].startswith("SELECT")
    assert "WHERE n = :n \\gset" in script
    assert "make_interval(mins => :lead_minutes)" in script
    begin = lines.index("BEGIN;")
    assert lines[-1] == "COMMIT;"
    book = "\n".join(lines[begin + 1 : -1])
    assert book.startswith("UPDATE availability_slots")
    for variable in (":target", ":id", ":tenant_id", ":sources", ":earliest_start", ":now"):
        assert variable in book
    assert "%(" not in script


def test_the_booking_is_the_slot_contexts_own_book_slot_statement() -> None:
    assert booking_statements()[2] == query("book_slot")


def test_the_bookings_other_parameters_come_from_the_state_machine_and_the_lead_time() -> None:
    assert booking_variables() == {
        "target": "Booked",
        "sources": "{Available}",
        "lead_minutes": "60",
    }


def test_a_booking_script_needs_candidates() -> None:
    with pytest.raises(ValueError, match="no candidate"):
        booking_script(["SELECT 1", "SELECT 2"], candidates=0)


def test_pgbench_runs_prepared_at_a_fixed_rate_logging_every_transaction() -> None:
    argv = pgbench_argv(
        Path("/bin/pgbench"),
        "postgresql://u@h/db",
        Path("/work/s.sql"),
        PgbenchSettings(seconds=15.6, rate_per_second=200, clients=4, variables={"a": "{X}"}),
        Path("/work/log"),
    )

    assert argv[0] == "/bin/pgbench"
    assert {"--no-vacuum", "--protocol=prepared", "--rate=200", "--client=4", "--log"} <= set(argv)
    assert "--time=16" in argv
    assert "--log-prefix=/work/log" in argv
    assert "--define=a={X}" in argv
    assert argv[-1] == "postgresql://u@h/db"
