"""The slot context's pure rules: publication limits, overlaps (against a brute-force
model), the state machine, the rule errors and their codes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slot_expiration.domain import (
    BOOK,
    EXPIRE,
    ForbiddenTransitionError,
    Slot,
    SlotRuleError,
    SlotStatus,
    require_transition,
    sources_of,
)
from slot_expiration.slots import (
    BOOKABLE,
    MAX_BATCH_SLOTS,
    MAX_SLOT_DURATION,
    OCCUPYING,
    RULE_ERRORS,
    BatchTooLargeError,
    BeyondHorizonError,
    EmptyBatchError,
    InvalidRangeError,
    SlotNotAvailableError,
    SlotOverlapError,
    SlotRange,
    SlotTooLongError,
    StartNotInFutureError,
)
from slot_expiration.slots.ranges import overlaps_with, overlaps_within
from slot_expiration.slots.rules import check_publication

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
HORIZON = timedelta(days=90)


def at(minutes: int, length: int = 30) -> SlotRange:
    start = NOW + timedelta(minutes=minutes)
    return SlotRange(start, start + timedelta(minutes=length))


def existing(slot: SlotRange, status: SlotStatus = SlotStatus.AVAILABLE) -> Slot:
    return Slot(uuid4(), uuid4(), uuid4(), slot.start_at, slot.end_at, status, 1, NOW, NOW)


ranges = st.builds(at, st.integers(-60, 600), st.integers(1, 240))


# --- publication --------------------------------------------------------------------


def test_a_valid_batch_passes() -> None:
    check_publication([at(60), at(90), at(600)], NOW, HORIZON)


def test_an_empty_batch_is_refused() -> None:
    with pytest.raises(EmptyBatchError):
        check_publication([], NOW, HORIZON)


def test_500_slots_pass_and_501_are_too_large() -> None:
    batch = [at(10 + 60 * i) for i in range(MAX_BATCH_SLOTS + 1)]

    check_publication(batch[:MAX_BATCH_SLOTS], NOW, HORIZON)
    with pytest.raises(BatchTooLargeError, match="501 slots"):
        check_publication(batch, NOW, HORIZON)


def test_every_slot_ending_at_or_before_its_start_is_named() -> None:
    with pytest.raises(InvalidRangeError) as refused:
        check_publication([at(60), at(90, 0), at(120, -5)], NOW, HORIZON)

    assert [position for position, _ in refused.value.slots] == [2, 3]
    assert "#2 " in str(refused.value)


def lasting(length: timedelta, minutes: int = 60) -> SlotRange:
    start = NOW + timedelta(minutes=minutes)
    return SlotRange(start, start + length)


def test_a_slot_may_last_exactly_24_hours_and_not_a_second_more() -> None:
    check_publication([lasting(MAX_SLOT_DURATION)], NOW, HORIZON)
    with pytest.raises(SlotTooLongError) as refused:
        check_publication([lasting(MAX_SLOT_DURATION + timedelta(seconds=1))], NOW, HORIZON)

    assert timedelta(hours=24) == MAX_SLOT_DURATION
    assert refused.value.code == "CAL_SLOT_TOO_LONG"
    assert refused.value.longest == MAX_SLOT_DURATION
    assert "at most 24 hours" in str(refused.value)


lengths = st.one_of(
    st.timedeltas(timedelta(microseconds=1), MAX_SLOT_DURATION),
    st.timedeltas(MAX_SLOT_DURATION + timedelta(microseconds=1), timedelta(days=400)),
)


@given(st.lists(lengths, min_size=1, max_size=6))
def test_exactly_the_slots_longer_than_the_maximum_are_named(
    batch_lengths: list[timedelta],
) -> None:
    # 400 days apart, so no two slots overlap and only the lengths can break a rule.
    starts = [60 + 60 * 24 * 400 * i for i in range(len(batch_lengths))]
    batch = [lasting(length, start) for length, start in zip(batch_lengths, starts, strict=True)]
    horizon = timedelta(minutes=starts[-1])
    expected = [i for i, length in enumerate(batch_lengths, 1) if length > MAX_SLOT_DURATION]

    if not expected:
        check_publication(batch, NOW, horizon)
        return
    with pytest.raises(SlotTooLongError) as refused:
        check_publication(batch, NOW, horizon)
    assert [position for position, _ in refused.value.slots] == expected


def test_the_range_is_checked_before_the_length_and_the_length_before_the_start() -> None:
    inverted = SlotRange(NOW + timedelta(days=3), NOW + timedelta(days=2))
    past_and_long = lasting(timedelta(days=111), minutes=-60)

    with pytest.raises(InvalidRangeError):
        check_publication([past_and_long, inverted], NOW, HORIZON)
    with pytest.raises(SlotTooLongError):
        check_publication([past_and_long], NOW, HORIZON)


def test_a_slot_must_start_strictly_after_now() -> None:
    with pytest.raises(StartNotInFutureError) as refused:
        check_publication([at(0), at(1), at(-1)], NOW, HORIZON)

    assert [position for position, _ in refused.value.slots] == [1, 3]


def test_a_slot_may_start_at_the_horizon_and_not_a_minute_later() -> None:
    limit = int(HORIZON.total_seconds() // 60)

    check_publication([at(limit)], NOW, HORIZON)
    with pytest.raises(BeyondHorizonError) as refused:
        check_publication([at(limit + 1)], NOW, HORIZON)
    assert refused.value.latest_start == NOW + HORIZON


def test_the_size_is_checked_before_the_ranges() -> None:
    with pytest.raises(BatchTooLargeError):
        check_publication([at(-10, -10)] * (MAX_BATCH_SLOTS + 1), NOW, HORIZON)


def test_overlaps_inside_the_batch_are_refused_naming_each_pair() -> None:
    with pytest.raises(SlotOverlapError) as refused:
        check_publication([at(60, 60), at(200), at(90)], NOW, HORIZON)

    (conflict,) = refused.value.conflicts
    assert (conflict.position, conflict.other_position) == (1, 3)
    assert "#1 " in str(refused.value)
    assert "#3 " in str(refused.value)


def test_touching_slots_do_not_overlap() -> None:
    assert not at(60).overlaps(at(90))
    assert at(60).overlaps(at(89))


def test_a_range_needs_a_time_zone() -> None:
    with pytest.raises(ValueError, match="time zone"):
        SlotRange(datetime(2026, 12, 2, 12, 0), datetime(2026, 12, 2, 13, 0))


@given(st.lists(ranges, max_size=12))
def test_overlaps_within_finds_exactly_the_overlapping_pairs(batch: list[SlotRange]) -> None:
    expected = {
        (i + 1, j + 1)
        for i, a in enumerate(batch)
        for j, b in enumerate(batch)
        if i < j and a.overlaps(b)
    }

    found = [(c.position, c.other_position) for c in overlaps_within(batch)]

    assert sorted(found) == found
    assert set(found) == expected
    assert len(found) == len(expected)


@given(st.lists(ranges, max_size=8), st.lists(ranges, max_size=8))
def test_overlaps_with_finds_exactly_the_pairs_with_existing_slots(
    batch: list[SlotRange], taken: list[SlotRange]
) -> None:
    # Existing slots may overlap one another (rows written by other parts of the
    # calendar) and have any length: the search window must still find them all.
    rows = [existing(slot) for slot in taken]
    expected = {
        (i + 1, row.id)
        for i, slot in enumerate(batch)
        for row in rows
        if slot.overlaps(SlotRange(row.start_at, row.end_at))
    }

    found = [(c.position, c.existing_id) for c in overlaps_with(batch, rows)]

    assert set(found) == expected
    assert len(found) == len(expected)


# --- the state machine and the codes ------------------------------------------------


def test_the_transitions_of_the_operations_come_from_the_state_machine() -> None:
    assert sources_of(SlotStatus.ARCHIVED) == {SlotStatus.AVAILABLE, SlotStatus.EXPIRED}
    assert sources_of(SlotStatus.BOOKED) == BOOKABLE == {SlotStatus.AVAILABLE}
    assert (BOOK.source, BOOK.target) == (SlotStatus.AVAILABLE, SlotStatus.BOOKED)
    assert (EXPIRE.source, EXPIRE.target) == (SlotStatus.AVAILABLE, SlotStatus.EXPIRED)
    assert {SlotStatus.AVAILABLE, SlotStatus.BOOKED} == OCCUPYING


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (SlotStatus.BOOKED, SlotStatus.ARCHIVED),
        (SlotStatus.ARCHIVED, SlotStatus.ARCHIVED),
        (SlotStatus.ARCHIVED, SlotStatus.AVAILABLE),
        (SlotStatus.EXPIRED, SlotStatus.BOOKED),
        (SlotStatus.EXPIRED, SlotStatus.AVAILABLE),
    ],
)
def test_a_forbidden_transition_is_a_rule_error_with_its_code_naming_the_slot(
    source: SlotStatus, target: SlotStatus
) -> None:
    slot_id = uuid4()
    with pytest.raises(ForbiddenTransitionError) as refused:
        require_transition(source, target, slot_id)

    assert isinstance(refused.value, SlotRuleError)
    assert isinstance(refused.value, ValueError)
    assert refused.value.describe() == (
        f"CAL_SLOT_FORBIDDEN_TRANSITION: slot {slot_id} cannot go from {source} to {target}"
    )


def test_every_rule_error_has_its_own_stable_cal_slot_code() -> None:
    codes = [error.code for error in RULE_ERRORS]

    assert len(set(codes)) == len(codes)
    assert all(code.startswith("CAL_SLOT_") and code.isupper() for code in codes)
    assert all(issubclass(error, SlotRuleError) for error in RULE_ERRORS)
    assert {
        "CAL_SLOT_NOT_AVAILABLE",
        "CAL_SLOT_LEAD_TIME_VIOLATION",
        "CAL_SLOT_OVERLAP",
        "CAL_SLOT_BATCH_TOO_LARGE",
        "CAL_SLOT_TOO_LONG",
        "CAL_SLOT_FORBIDDEN_TRANSITION",
    } <= set(codes)


def test_not_available_says_nothing_more_for_an_unknown_or_foreign_slot() -> None:
    slot_id = UUID(int=7)

    unknown = SlotNotAvailableError(slot_id)
    own = SlotNotAvailableError(slot_id, SlotStatus.EXPIRED)

    assert unknown.describe() == (
        f"CAL_SLOT_NOT_AVAILABLE: slot {slot_id} is not available for booking"
    )
    assert own.describe() == f"{unknown.describe()}: it is Expired"


def test_a_rule_error_describes_itself_on_one_line() -> None:
    conflicts = overlaps_within([at(60, 90), at(70), at(80), at(90)])
    refused = SlotOverlapError(conflicts)

    assert "\n" not in refused.describe()
    assert refused.describe().startswith("CAL_SLOT_OVERLAP: 6 overlap(s), nothing published: ")
