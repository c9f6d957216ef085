"""The benchmark's options: checked before anything runs, one clear message each."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.options import (
    DEFAULT_JSON_OUT,
    BenchOptions,
    BenchOptionsError,
    WorkerTuning,
    bench_options,
    check_json_out,
    check_server_settings,
    check_url,
    choose_mode,
    parse_sections,
    reproduce_command,
)
from benchmarks.plan import Mode, Section

from slot_expiration.options import SynchronousCommit


def test_no_flag_is_the_default_run_and_each_flag_its_mode() -> None:
    assert choose_mode(quick=False, full=False) is Mode.DEFAULT
    assert choose_mode(quick=True, full=False) is Mode.QUICK
    assert choose_mode(quick=False, full=True) is Mode.FULL


def test_quick_and_full_together_are_refused() -> None:
    with pytest.raises(BenchOptionsError, match="--quick and --full"):
        choose_mode(quick=True, full=True)


def test_sections_default_to_all_in_the_order_a_run_measures_them() -> None:
    assert parse_sections(None) == tuple(Section)
    assert [s.value for s in parse_sections(None)] == ["a", "b", "c", "d", "g", "i", "f", "e", "h"]


def test_chosen_sections_keep_the_run_order_and_ignore_case_spaces_and_repeats() -> None:
    assert parse_sections("e, A,c,a") == (Section.BATCH, Section.PARALLEL, Section.GROWTH)


@pytest.mark.parametrize("text", ["j", "a,,b", "", "ab"])
def test_an_unknown_section_is_refused_naming_the_choices(text: str) -> None:
    with pytest.raises(
        BenchOptionsError, match=r"--sections: .*choose from a, b, c, d, e, f, g, h, i"
    ):
        parse_sections(text)


def test_the_json_goes_to_bench_results_json_by_default() -> None:
    assert check_json_out(None) == DEFAULT_JSON_OUT == Path("bench-results.json")


def test_a_json_path_in_an_existing_folder_is_taken(tmp_path: Path) -> None:
    assert check_json_out(str(tmp_path / "out.json")) == tmp_path / "out.json"


def test_a_json_path_in_a_missing_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BenchOptionsError, match=r"--json-out: folder .* does not exist"):
        check_json_out(str(tmp_path / "missing" / "out.json"))


def test_a_folder_as_json_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BenchOptionsError, match=r"--json-out: .* is a folder"):
        check_json_out(str(tmp_path))


@pytest.mark.parametrize("url", ["http://h/db", "postgresql://h:99999/db", "not a url"])
def test_a_url_that_is_no_postgresql_url_is_refused_without_echoing_it(url: str) -> None:
    with pytest.raises(BenchOptionsError, match="--database-url") as caught:
        check_url(url)

    assert url not in str(caught.value)


def test_all_options_together_make_one_options_object(tmp_path: Path) -> None:
    options = bench_options(
        quick=True,
        full=False,
        sections="a,b",
        json_out=str(tmp_path / "x.json"),
        database_url="postgresql://u:pw@h/db",
    )

    assert options == BenchOptions(
        Mode.QUICK, (Section.BATCH, Section.DRAIN), tmp_path / "x.json", "postgresql://u:pw@h/db"
    )


def test_the_command_that_reproduces_a_run_hides_the_password() -> None:
    options = BenchOptions(
        Mode.FULL, (Section.GROWTH,), Path("out/e.json"), "postgresql://u:s3cret@h:5432/db"
    )

    command = reproduce_command(options)

    assert command == (
        "./scripts/bench --full --sections e "
        "--database-url 'postgresql://u:***@h:5432/db' --json-out out/e.json"
    )


def test_the_command_names_the_workers_prepared_statements_when_asked_for() -> None:
    options = BenchOptions(Mode.QUICK, tuple(Section), DEFAULT_JSON_OUT, None, WorkerTuning(True))

    assert reproduce_command(options) == "./scripts/bench --quick --prepared-statements"


def test_the_command_names_the_workers_batch_pause_when_one_is_set() -> None:
    tuning = WorkerTuning(batch_pause_seconds=0.02)
    options = BenchOptions(Mode.DEFAULT, (Section.BOOKING,), DEFAULT_JSON_OUT, None, tuning)

    assert reproduce_command(options) == ("./scripts/bench --sections d --batch-pause-seconds 0.02")


def test_the_command_names_the_workers_synchronous_commit_when_it_is_not_the_default() -> None:
    tuning = WorkerTuning(synchronous_commit=SynchronousCommit.ON)
    options = BenchOptions(Mode.DEFAULT, (Section.DRAIN,), DEFAULT_JSON_OUT, None, tuning)

    assert reproduce_command(options) == "./scripts/bench --sections b --synchronous-commit on"
    assert WorkerTuning().synchronous_commit is SynchronousCommit.OFF  # the worker's default


def test_a_wrong_synchronous_commit_is_refused_by_the_workers_own_model() -> None:
    with pytest.raises(BenchOptionsError, match="--synchronous-commit"):
        bench_options(
            quick=True,
            full=False,
            sections=None,
            json_out=None,
            database_url=None,
            synchronous_commit="maybe",
        )


def test_the_command_of_a_default_run_is_the_bare_command() -> None:
    options = BenchOptions(Mode.DEFAULT, tuple(Section), DEFAULT_JSON_OUT, None)

    assert reproduce_command(options) == "./scripts/bench"


def test_server_settings_are_name_value_pairs_each_name_once() -> None:
    given = ("wal_compression=on", "max_wal_size=1GB")

    assert check_server_settings(given, given_database=False) == given
    for bad in ("wal_compression", "=on", "Wal=on", "wal_compression= "):
        with pytest.raises(BenchOptionsError, match="is not NAME=VALUE"):
            check_server_settings((bad,), given_database=False)
    with pytest.raises(BenchOptionsError, match="wal_compression given twice"):
        check_server_settings(("wal_compression=on", "wal_compression=off"), given_database=False)


def test_server_settings_are_for_the_embedded_server_only() -> None:
    with pytest.raises(BenchOptionsError, match="embedded server only"):
        bench_options(
            quick=True,
            full=False,
            sections=None,
            json_out=None,
            database_url="postgresql://u:pw@h/db",
            server_setting=("wal_compression=on",),
        )


def test_the_command_names_the_server_settings_given() -> None:
    options = BenchOptions(
        Mode.DEFAULT, (Section.BOOKING,), DEFAULT_JSON_OUT, None, server_settings=("a=1", "b=2")
    )

    assert reproduce_command(options) == (
        "./scripts/bench --sections d --server-setting a=1 --server-setting b=2"
    )
