"""Demo slots: the mix asked for, past and future on the right side of `now`, publishable
(no overlaps per consultant, after the publishing clock, within the horizon), reproducible."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from slot_expiration.demo.seed import (
    DemoMix,
    demo_slots,
    publications,
    publishing_clock,
)
from slot_expiration.domain import SlotStatus
from slot_expiration.slots import MAX_BATCH_SLOTS, SlotPolicy
from slot_expiration.slots.rules import check_publication

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
MIX = DemoMix(past_available=40, past_booked=7, future_available=11, archived=3)


def test_counts_per_kind_match_the_demo_mix() -> None:
    slots = demo_slots(NOW, MIX)

    kinds = Counter((slot.status, slot.range.start_at < NOW) for slot in slots)
    assert kinds == {
        (SlotStatus.AVAILABLE, True): MIX.past_available,
        (SlotStatus.BOOKED, True): MIX.past_booked,
        (SlotStatus.AVAILABLE, False): MIX.future_available,
        (SlotStatus.ARCHIVED, True): MIX.archived,
    }
    assert len(slots) == MIX.total == 61


def test_the_default_mix_gives_1800_past_available_slots_among_2350() -> None:
    slots = demo_slots(NOW, DemoMix())

    backlog = [s for s in slots if s.status is SlotStatus.AVAILABLE and s.range.start_at <= NOW]
    assert len(backlog) == 1_800
    assert len(slots) == DemoMix().total == 2_350


def test_past_slots_start_within_three_days_before_now_and_future_ones_within_three_after() -> None:
    slots = demo_slots(NOW, MIX)
    future = [slot for slot in slots if slot.range.start_at > NOW]
    past = [slot for slot in slots if slot.range.start_at <= NOW]

    assert len(future) == MIX.future_available
    assert all(slot.status is SlotStatus.AVAILABLE for slot in future)
    assert all(slot.range.start_at <= NOW + timedelta(days=3) for slot in future)
    assert len(past) == MIX.total - MIX.future_available
    assert all(NOW - timedelta(days=3) <= slot.range.start_at < NOW for slot in past)


def test_every_publication_passes_the_publish_rules_at_the_publishing_clock() -> None:
    clock = publishing_clock(NOW)
    batches = publications(demo_slots(NOW, DemoMix()))

    assert clock < NOW - timedelta(days=3)
    for batch in batches:
        assert len({(s.tenant_id, s.consultant_id) for s in batch}) == 1
        assert len(batch) <= MAX_BATCH_SLOTS
        check_publication([s.range for s in batch], clock, SlotPolicy().horizon)
    assert sum(len(batch) for batch in batches) == DemoMix().total


def test_the_booked_ones_can_be_booked_at_the_publishing_clock() -> None:
    clock = publishing_clock(NOW)
    earliest = SlotPolicy().earliest_bookable_start(clock, None)

    booked = [s for s in demo_slots(NOW, MIX) if s.status is SlotStatus.BOOKED]

    assert booked
    assert all(slot.range.start_at >= earliest for slot in booked)


def test_every_slot_lasts_half_an_hour() -> None:
    slots = demo_slots(NOW, MIX)

    assert {slot.range.end_at - slot.range.start_at for slot in slots} == {timedelta(minutes=30)}


def test_the_same_seed_gives_the_same_slots() -> None:
    assert demo_slots(NOW, MIX, seed=11) == demo_slots(NOW, MIX, seed=11)


def test_another_seed_gives_other_agencies_and_consultants() -> None:
    first, second = demo_slots(NOW, MIX, seed=11), demo_slots(NOW, MIX, seed=12)

    assert {s.consultant_id for s in first}.isdisjoint(s.consultant_id for s in second)
    assert {s.tenant_id for s in first}.isdisjoint(s.tenant_id for s in second)


def test_slots_spread_over_at_most_12_agencies_and_60_consultants() -> None:
    slots = demo_slots(NOW, DemoMix())

    assert 1 < len({slot.tenant_id for slot in slots}) <= 12
    assert 1 < len({slot.consultant_id for slot in slots}) <= 60
