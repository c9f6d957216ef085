"""What the slots commands read and how they fail: the page cursor, START/END ranges and
files of them, the slot context's options, and exit 3 for a rule rejection."""

from __future__ import annotations

import contextlib
import io
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, BinaryIO
from uuid import UUID

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slot_expiration.cli.errors import ExitCode, reject
from slot_expiration.cli.slot_input import (
    MAX_FILE_BYTES,
    MAX_LINE_BYTES,
    parse_moment,
    parse_range,
    read_lines,
    read_ranges,
)
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

    slots = read_ranges(io.BytesIO(text.encode()))

    assert [s.start_at.hour for s in slots] == [10, 11]


def test_a_malformed_line_is_a_usage_error_naming_its_number() -> None:
    text = "2026-12-02T10:00Z/2026-12-02T10:30Z\nsoon/later\n"

    with pytest.raises(click.BadParameter, match="line 2"):
        read_ranges(io.BytesIO(text.encode()))


def test_a_malformed_line_is_echoed_shortened() -> None:
    with pytest.raises(click.BadParameter) as refused:
        read_ranges(io.BytesIO(b"x" * MAX_LINE_BYTES))

    assert len(refused.value.format_message()) < 200


# --- the file's bytes: UTF-8, and limits that hold before it is read whole ----------

RANGE_LINE = b"2026-12-02T10:00Z/2026-12-02T10:30Z\n"
COMMENT_KIB = b"#" * 1023 + b"\n"  # a 1 KiB line: 1024 of them are exactly the limit


class Endless(io.RawIOBase):
    """A stream that never ends (like /dev/zero or a runaway pipe): `pattern` over and
    over, counting the bytes it has handed out."""

    def __init__(self, pattern: bytes) -> None:
        self.pattern = pattern
        self.served = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        start = self.served % len(self.pattern)
        repeated = self.pattern * (len(view) // len(self.pattern) + 2)
        view[:] = repeated[start : start + len(view)]
        self.served += len(view)
        return len(view)


# What a buffered reader may fetch beyond what it was asked for.
READ_AHEAD = io.DEFAULT_BUFFER_SIZE


def test_a_line_that_is_not_utf8_is_a_usage_error_naming_the_line_and_the_byte() -> None:
    data = RANGE_LINE + b"# caf\xe9 \xe0 10h\n" + RANGE_LINE

    with pytest.raises(click.BadParameter) as refused:
        read_ranges(io.BytesIO(data))

    message = refused.value.format_message()
    assert "--from-file" in message
    assert f"line 2 is not UTF-8: byte 0xe9 at offset {len(RANGE_LINE) + 5} " in message


@given(st.binary(max_size=300))
def test_any_bytes_are_read_back_exactly_or_refused_where_utf8_decoding_fails(
    data: bytes,
) -> None:
    try:
        expected = data.decode("utf-8")
    except UnicodeDecodeError as failed:
        line = data[: failed.start].count(b"\n") + 1
        with pytest.raises(click.BadParameter, match=f"line {line} .* offset {failed.start} "):
            list(read_lines(io.BytesIO(data)))
        return

    assert "".join(text for _, text in read_lines(io.BytesIO(data))) == expected


def test_a_regular_file_of_exactly_the_limit_is_read(tmp_path: Path) -> None:
    listing = tmp_path / "full.txt"
    listing.write_bytes(COMMENT_KIB * (MAX_FILE_BYTES // len(COMMENT_KIB)))

    with listing.open("rb") as source:
        assert read_ranges(source) == []


def test_a_regular_file_over_the_limit_is_refused_by_its_size_before_a_byte_is_read(
    tmp_path: Path,
) -> None:
    listing = tmp_path / "huge.txt"
    with listing.open("wb") as sparse:
        sparse.truncate(4 * 1024**3)  # 4 GiB that take no disk space

    with listing.open("rb") as source:
        with pytest.raises(click.BadParameter) as refused:
            read_ranges(source)
        assert source.tell() == 0

    assert (
        f"is {4 * 1024**3} bytes, over the limit of {MAX_FILE_BYTES} bytes"
        in refused.value.format_message()
    )


def test_a_regular_file_one_byte_over_the_limit_is_refused(tmp_path: Path) -> None:
    listing = tmp_path / "over.txt"
    listing.write_bytes(COMMENT_KIB * (MAX_FILE_BYTES // len(COMMENT_KIB)) + b"\n")

    with (
        listing.open("rb") as source,
        pytest.raises(click.BadParameter, match="is 1048577 bytes, over"),
    ):
        read_ranges(source)


def test_a_stream_of_exactly_the_limit_is_read() -> None:
    stream = io.BytesIO(COMMENT_KIB * (MAX_FILE_BYTES // len(COMMENT_KIB)))

    assert read_ranges(stream) == []


def test_an_endless_stream_is_refused_after_reading_just_past_the_limit() -> None:
    endless = Endless(RANGE_LINE)

    with pytest.raises(click.BadParameter, match=f"goes over the limit of {MAX_FILE_BYTES} bytes"):
        read_ranges(io.BufferedReader(endless))

    assert MAX_FILE_BYTES < endless.served <= MAX_FILE_BYTES + 1 + READ_AHEAD


def test_a_line_without_a_newline_is_refused_without_being_read_whole() -> None:
    endless = Endless(b"\0")  # /dev/zero

    with pytest.raises(click.BadParameter, match=f"line 1 is longer than {MAX_LINE_BYTES} bytes"):
        read_ranges(io.BufferedReader(endless))

    assert endless.served <= MAX_LINE_BYTES + 1 + READ_AHEAD


def test_a_line_may_hold_the_line_limit_and_not_a_byte_more() -> None:
    longest = b"#" * MAX_LINE_BYTES
    assert [n for n, _ in read_lines(io.BytesIO(longest + b"\n" + longest))] == [1, 2]

    with pytest.raises(click.BadParameter, match="line 2 is longer"):
        list(read_lines(io.BytesIO(longest + b"\n" + longest + b"#\n")))


@contextmanager
def pipe_fed_with(data: bytes) -> Iterator[BinaryIO]:
    """The read end of a real pipe a thread writes `data` into, as a shell pipe feeds
    stdin. Closing the read end early ends the writer with a broken pipe."""
    read_fd, write_fd = os.pipe()

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError), open(write_fd, "wb") as sink:
            sink.write(data)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        with open(read_fd, "rb") as source:
            yield source
    finally:
        writer.join()


def test_a_pipe_larger_than_the_limit_is_refused_while_read() -> None:
    data = RANGE_LINE * (2 * MAX_FILE_BYTES // len(RANGE_LINE))
    refusal = f"goes over the limit of {MAX_FILE_BYTES} bytes"
    with pipe_fed_with(data) as source, pytest.raises(click.BadParameter, match=refusal):
        read_ranges(source)


def test_a_pipe_within_the_limit_is_read() -> None:
    with pipe_fed_with(RANGE_LINE * 500) as source:
        assert len(read_ranges(source)) == 500


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
