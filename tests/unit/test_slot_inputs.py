"""What the slots commands read and how they fail: the page cursor, START/END ranges and
files of them, the slot context's options, and exit 3 for a rule rejection."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from uuid import UUID

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slot_expiration.cli.errors import ExitCode, reject
from slot_expiration.cli.slot_input import parse_moment, parse_range, read_ranges
from slot_expiration.options import OptionsError, load_settings
from slot_expiration.slots import InvalidCursorError, ShowcaseCursor, SlotOptions, SlotPolicy

moments = st.datetimes(
    min_value=datetime(2000, 1, 1),
    max_value=datetime(2100, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
)


@given(moments, st.uuids())
def test_a_cursor_decodes_to_what_it_encoded(start_at: datetime, slot_id: UUID) -> None:
    cursor = ShowcaseCursor(start_at, slot_id)

    decoded = ShowcaseCursor.decode(cursor.encode())

    assert decoded == ShowcaseCursor(start_at.astimezone(UTC), slot_id)
    assert decoded.start_at == start_at


@given(st.text(max_size=60))
def test_any_other_string_is_not_a_cursor_or_decodes_to_a_valid_one(text: str) -> None:
    try:
        cursor = ShowcaseCursor.decode(text)
    except InvalidCursorError:
        return
    assert cursor.start_at.tzinfo is not None


@pytest.mark.parametrize("text", ["", "garbage", "bm90IGEgY3Vyc29y", "MjAyNi0xMi0wMnxub3BlIQ"])
def test_a_malformed_cursor_is_refused(text: str) -> None:
    with pytest.raises(InvalidCursorError):
        ShowcaseCursor.decode(text)


def test_a_moment_without_offset_is_utc_and_one_with_an_offset_keeps_it() -> None:
    assert parse_moment("2026-12-02T10:00") == datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
    assert parse_moment("2026-12-02T10:00:00Z") == datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
    assert parse_moment("2026-12-02T12:00+02:00") == datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def test_a_range_is_start_slash_end() -> None:
    slot = parse_range("2026-12-02T10:00Z/2026-12-02T10:30Z")

    assert (slot.start_at, slot.end_at) == (
        datetime(2026, 12, 2, 10, 0, tzinfo=UTC),
        datetime(2026, 12, 2, 10, 30, tzinfo=UTC),
    )
    with pytest.raises(ValueError, match="START/END"):
        parse_range("2026-12-02T10:00Z")


def test_a_file_holds_one_range_per_line_blank_lines_and_comments_skipped() -> None:
    text = (
        "# week 49\n2026-12-02T10:00Z/2026-12-02T10:30Z\n\n  2026-12-02T11:00Z/2026-12-02T11:30Z\n"
    )

    slots = read_ranges(io.StringIO(text))

    assert [s.start_at.hour for s in slots] == [10, 11]


def test_a_malformed_line_is_a_usage_error_naming_its_number() -> None:
    text = "2026-12-02T10:00Z/2026-12-02T10:30Z\nsoon/later\n"

    with pytest.raises(click.BadParameter, match="line 2"):
        read_ranges(io.StringIO(text))


def test_the_slot_options_default_to_a_90_day_horizon_and_a_60_minute_lead_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SLOT_EXPIRATION_HORIZON_DAYS", raising=False)
    monkeypatch.delenv("SLOT_EXPIRATION_MIN_LEAD_TIME_MINUTES", raising=False)

    assert load_settings(SlotOptions).policy() == SlotPolicy(
        horizon=timedelta(days=90), min_lead_time=timedelta(minutes=60)
    )


def test_the_slot_options_read_their_variables_and_a_flag_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLOT_EXPIRATION_HORIZON_DAYS", "7")
    monkeypatch.setenv("SLOT_EXPIRATION_MIN_LEAD_TIME_MINUTES", "0")
    # The worker's variables beside them are none of these options' business.
    monkeypatch.setenv("SLOT_EXPIRATION_BATCH_SIZE", "20")

    from_environment = load_settings(SlotOptions)
    flagged = load_settings(SlotOptions, horizon_days=14)

    assert (from_environment.horizon_days, from_environment.min_lead_time_minutes) == (7, 0)
    assert flagged.horizon_days == 14


@pytest.mark.parametrize(
    ("given", "mention"),
    [
        ({"min_lead_time_minutes": -1}, "--min-lead-time-minutes"),
        ({"horizon_days": 0}, "--horizon-days"),
        ({"database_url": "mysql://nope"}, "--database-url"),
    ],
)
def test_a_wrong_slot_option_names_its_flag_and_variable(
    given: dict[str, Any], mention: str
) -> None:
    with pytest.raises(OptionsError, match=mention) as refused:
        load_settings(SlotOptions, **given)

    assert "SLOT_EXPIRATION_" in str(refused.value)


def test_a_rule_rejection_is_one_line_starting_with_its_code_and_exit_3(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        reject("CAL_SLOT_OVERLAP", "2 overlap(s),\n  nothing published")

    assert exited.value.code == ExitCode.RULE == 3
    assert capsys.readouterr().err == "CAL_SLOT_OVERLAP: 2 overlap(s), nothing published\n"
