"""The worker's options: defaults, environment, flags, ranges, and never a leaked password."""

from __future__ import annotations

import traceback
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slot_expiration.options import (
    LogFormat,
    OptionsError,
    SynchronousCommit,
    WorkerOptions,
    load_options,
    redact_url,
)

PASSWORD = "s3cret"  # noqa: S105 - the made-up password the tests look for


pytestmark = pytest.mark.usefixtures("no_worker_environment")


def _options_error(**given: Any) -> OptionsError:
    with pytest.raises(OptionsError) as caught:
        load_options(**given)
    return caught.value


def _everything_shown(exc: BaseException) -> str:
    """The message and the whole printed traceback, as a user or a log would see them."""
    return str(exc) + repr(exc) + "".join(traceback.format_exception(exc))


# -- defaults -------------------------------------------------------------------------------


def test_defaults_are_batch_500_interval_300_max_cycle_30_grace_10_json_logs() -> None:
    options = load_options()

    assert options.batch_size == 500
    assert options.interval_seconds == 300.0
    assert options.max_cycle_seconds == 30.0
    assert options.shutdown_grace_seconds == 10.0
    assert options.log_format is LogFormat.JSON
    assert options.database_url is None


def test_flags_given_as_none_count_as_not_given() -> None:
    options = load_options(batch_size=None, interval_seconds=None, database_url=None)

    assert options.batch_size == 500
    assert options.interval_seconds == 300.0
    assert options.database_url is None


def test_statement_timeout_is_the_cycle_budget_in_whole_milliseconds_rounded_up() -> None:
    assert load_options(max_cycle_seconds=30).statement_timeout_ms == 30_000
    assert load_options(max_cycle_seconds=0.0015).statement_timeout_ms == 2


# -- environment and flags ------------------------------------------------------------------


def test_every_option_is_read_from_its_slot_expiration_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLOT_EXPIRATION_DATABASE_URL", f"postgresql://u:{PASSWORD}@db:5432/cal")
    monkeypatch.setenv("SLOT_EXPIRATION_BATCH_SIZE", "42")
    monkeypatch.setenv("SLOT_EXPIRATION_INTERVAL_SECONDS", "12.5")
    monkeypatch.setenv("SLOT_EXPIRATION_MAX_CYCLE_SECONDS", "7")
    monkeypatch.setenv("SLOT_EXPIRATION_SHUTDOWN_GRACE_SECONDS", "3")
    monkeypatch.setenv("SLOT_EXPIRATION_LOG_FORMAT", "console")

    options = load_options()

    assert options.require_database_url() == f"postgresql://u:{PASSWORD}@db:5432/cal"
    assert options.batch_size == 42
    assert options.interval_seconds == 12.5
    assert options.max_cycle_seconds == 7.0
    assert options.shutdown_grace_seconds == 3.0
    assert options.log_format is LogFormat.CONSOLE


def test_a_flag_given_to_load_options_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLOT_EXPIRATION_BATCH_SIZE", "42")
    monkeypatch.setenv("SLOT_EXPIRATION_DATABASE_URL", "postgresql://env@db/cal")

    options = load_options(batch_size=7, database_url="postgresql://flag@db/cal")

    assert options.batch_size == 7
    assert options.require_database_url() == "postgresql://flag@db/cal"


def test_a_flag_not_given_leaves_the_environment_value_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLOT_EXPIRATION_BATCH_SIZE", "42")

    assert load_options(batch_size=None, interval_seconds=60).batch_size == 42


def test_an_out_of_range_environment_value_is_rejected_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLOT_EXPIRATION_BATCH_SIZE", "0")

    message = str(_options_error())

    assert "--batch-size" in message
    assert "SLOT_EXPIRATION_BATCH_SIZE" in message


def test_an_invalid_url_in_the_environment_is_rejected_without_its_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLOT_EXPIRATION_DATABASE_URL", f"mysql://u:{PASSWORD}@h/db")

    error = _options_error()

    assert "SLOT_EXPIRATION_DATABASE_URL" in str(error)
    assert PASSWORD not in _everything_shown(error)


# -- ranges ---------------------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [1, 500, 10_000])
def test_batch_size_from_1_to_10000_is_accepted(batch_size: int) -> None:
    assert load_options(batch_size=batch_size).batch_size == batch_size


def test_batch_size_above_10000_is_rejected_naming_the_option() -> None:
    message = str(_options_error(batch_size=10_001))

    assert "--batch-size" in message
    assert "SLOT_EXPIRATION_BATCH_SIZE" in message


@pytest.mark.parametrize("batch_size", [0, -1])
def test_batch_size_below_1_is_rejected_naming_the_option(batch_size: int) -> None:
    assert "--batch-size" in str(_options_error(batch_size=batch_size))


@pytest.mark.parametrize("option", ["interval_seconds", "max_cycle_seconds"])
@pytest.mark.parametrize("value", [0, -0.5, float("nan"), float("inf")])
def test_interval_and_cycle_budget_must_be_positive_and_finite(option: str, value: float) -> None:
    assert "--" + option.replace("_", "-") in str(_options_error(**{option: value}))


def test_a_zero_shutdown_grace_is_accepted_and_a_negative_one_rejected() -> None:
    assert load_options(shutdown_grace_seconds=0).shutdown_grace_seconds == 0.0
    assert "--shutdown-grace-seconds" in str(_options_error(shutdown_grace_seconds=-1))


def test_the_batch_pause_is_off_by_default_and_bounded_to_a_minute() -> None:
    assert load_options().batch_pause_seconds == 0.0
    assert load_options(batch_pause_seconds=0.05).batch_pause_seconds == 0.05
    for wrong in (-0.1, 60.5, float("nan")):
        assert "--batch-pause-seconds" in str(_options_error(batch_pause_seconds=wrong))


def test_a_batch_pause_as_long_as_the_cycle_budget_is_rejected() -> None:
    message = str(_options_error(batch_pause_seconds=30, max_cycle_seconds=30))

    assert "--batch-pause-seconds must be below --max-cycle-seconds" in message


def test_the_worker_commits_asynchronously_unless_told_otherwise() -> None:
    assert load_options().synchronous_commit is SynchronousCommit.OFF
    assert load_options(synchronous_commit="on").synchronous_commit is SynchronousCommit.ON


def test_an_unknown_synchronous_commit_is_rejected_naming_the_option() -> None:
    assert "--synchronous-commit" in str(_options_error(synchronous_commit="maybe"))


def test_an_unknown_log_format_is_rejected_naming_the_option() -> None:
    assert "--log-format" in str(_options_error(log_format="xml"))


def test_an_unknown_option_is_rejected() -> None:
    assert "batch" in str(_options_error(batch=5))


def test_several_bad_options_are_all_named_in_one_error() -> None:
    message = str(_options_error(batch_size=0, interval_seconds=0))

    assert "--batch-size" in message
    assert "--interval-seconds" in message


@given(st.integers(min_value=1, max_value=10_000))
def test_any_batch_size_in_range_is_accepted(batch_size: int) -> None:
    assert load_options(batch_size=batch_size).batch_size == batch_size


@given(st.integers(max_value=0) | st.integers(min_value=10_001))
def test_any_batch_size_out_of_range_is_rejected_naming_the_option(batch_size: int) -> None:
    assert "--batch-size" in str(_options_error(batch_size=batch_size))


# -- the database URL -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:pw@db:5432/calendar",
        "postgres://u@db/calendar",
        "postgresql:///calendar",
        "postgresql://u:pw@[::1]:5432/calendar?sslmode=require",
    ],
)
def test_postgresql_and_postgres_urls_are_accepted(url: str) -> None:
    assert load_options(database_url=url).require_database_url() == url


@pytest.mark.parametrize(
    "url",
    [
        f"mysql://u:{PASSWORD}@h/db",
        f"http://u:{PASSWORD}@h/db",
        f"u:{PASSWORD}@h/db",
        f"postgresql+psycopg://u:{PASSWORD}@h/db",
    ],
)
def test_a_url_that_is_not_postgresql_is_rejected_without_echoing_the_password(
    url: str,
) -> None:
    error = _options_error(database_url=url)

    assert "--database-url" in str(error)
    assert "postgresql://" in str(error)
    assert PASSWORD not in _everything_shown(error)


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://u:{PASSWORD}@host:99999/db",
        f"postgresql://u:{PASSWORD}@host:port/db",
        f"postgresql://u:{PASSWORD}@[::1/db",
        f"postgresql://u:{PASSWORD}@host:0/db",
    ],
)
def test_an_invalid_postgresql_url_is_rejected_without_echoing_the_password(url: str) -> None:
    error = _options_error(database_url=url)

    assert "--database-url" in str(error)
    assert PASSWORD not in _everything_shown(error)


def test_the_options_never_show_the_database_url_in_their_repr() -> None:
    options = load_options(database_url=f"postgresql://u:{PASSWORD}@db/cal")

    assert PASSWORD not in repr(options)
    assert PASSWORD not in str(options)


_INVALID_URL_TEMPLATES = (
    "postgresql://user:{}@db:99999/cal",
    "postgresql://user:{}@db:0/cal",
    "postgresql://user:{}@[::1/cal",
)
_FOREIGN_SCHEME_TEMPLATES = ("mysql://user:{}@db/cal", "redis://user:{}@db:6379")


@given(password=st.text(min_size=1, max_size=40).map(lambda text: "Pw" + text))
def test_no_password_ever_appears_in_an_options_error(password: str) -> None:
    encoded = quote(password, safe="")
    urls = [t.format(encoded) for t in _INVALID_URL_TEMPLATES + _FOREIGN_SCHEME_TEMPLATES]
    # A foreign scheme is rejected whatever the password does to the rest of the URL.
    urls += [t.format(password) for t in _FOREIGN_SCHEME_TEMPLATES]
    for url in urls:
        shown = _everything_shown(_options_error(database_url=url))

        assert password not in shown
        assert encoded not in shown


def test_require_database_url_returns_the_url_when_one_is_set() -> None:
    url = f"postgresql://u:{PASSWORD}@db/cal"

    assert load_options(database_url=url).require_database_url() == url


def test_require_database_url_without_one_names_the_flag_and_the_environment_variable() -> None:
    with pytest.raises(OptionsError) as caught:
        load_options().require_database_url()

    assert "--database-url" in str(caught.value)
    assert "SLOT_EXPIRATION_DATABASE_URL" in str(caught.value)


def test_with_database_url_returns_a_copy_with_the_url_and_the_other_options_kept() -> None:
    options = load_options(batch_size=42)

    copied = options.with_database_url("postgresql://u@127.0.0.1:5433/postgres")

    assert copied.require_database_url() == "postgresql://u@127.0.0.1:5433/postgres"
    assert copied.batch_size == 42
    assert options.database_url is None
    assert isinstance(copied, WorkerOptions)


def test_with_database_url_rejects_a_non_postgresql_url_without_echoing_the_password() -> None:
    with pytest.raises(ValueError, match=r"postgresql://") as caught:
        load_options().with_database_url(f"mysql://u:{PASSWORD}@h/db")

    assert PASSWORD not in _everything_shown(caught.value)


# -- redact_url -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        ("postgresql://u:s3cret@db/cal", "postgresql://u:***@db/cal"),
        (
            "postgresql://u:s3cret@db:5432/cal?sslmode=require",
            "postgresql://u:***@db:5432/cal?sslmode=require",
        ),
        ("postgresql://u:p%40ss@db/cal", "postgresql://u:***@db/cal"),
        ("postgresql://:s3cret@db/cal", "postgresql://:***@db/cal"),
        ("postgresql://u:s3cret@[::1]:5432/cal", "postgresql://u:***@[::1]:5432/cal"),
    ],
)
def test_redact_url_replaces_the_password_and_keeps_the_rest(url: str, redacted: str) -> None:
    assert redact_url(url) == redacted


@pytest.mark.parametrize(
    "url",
    ["postgresql://u@db:5432/cal", "postgresql://db/cal", "postgresql:///cal", "postgres://u@h"],
)
def test_redact_url_leaves_a_url_without_a_password_unchanged(url: str) -> None:
    assert redact_url(url) == url


def test_redact_url_of_an_unparsable_url_shows_nothing_of_it() -> None:
    assert redact_url(f"postgresql://u:{PASSWORD}@[::1/db") == "<invalid URL>"


# What a URL can carry to libpq: UTF-8 text (no lone surrogate), and no NUL, where libpq's
# strings end (a URL carrying one is not valid: shown as <invalid URL>).
_NO_NUL = st.characters(codec="utf-8", blacklist_characters="\x00")


@given(password=st.text(_NO_NUL, min_size=1, max_size=40).map(lambda text: "Pw" + text))
def test_no_password_ever_appears_in_redact_url_output(password: str) -> None:
    url = f"postgresql://user:{quote(password, safe='')}@db.example:5432/calendar"

    redacted = redact_url(url)

    assert redacted == "postgresql://user:***@db.example:5432/calendar"
    assert password not in redacted


def test_redact_url_hides_a_password_given_as_a_query_parameter() -> None:
    assert PASSWORD not in redact_url(f"postgresql://u@db:5432/cal?password={PASSWORD}")


def test_a_multi_host_postgresql_url_with_ports_is_accepted() -> None:
    url = "postgresql://u:pw@db1:5432,db2:5433/cal?target_session_attrs=read-write"

    assert load_options(database_url=url).require_database_url() == url
