"""Demo slots: the mix asked for, past and future on the right side of `now`, reproducible."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from slot_expiration.demo.seed import DemoMix, demo_slots
from slot_expiration.domain import SlotStatus

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
MIX = DemoMix(past_available=40, past_booked=7, future_available=11, already_expired=5, archived=3)


def test_counts_per_kind_match_the_demo_mix() -> None:
    slots = demo_slots(NOW, MIX)

    kinds = Counter((slot.status, slot.start_at < NOW) for slot in slots)
    assert kinds == {
        (SlotStatus.AVAILABLE, True): MIX.past_available,
        (SlotStatus.BOOKED, True): MIX.past_booked,
        (SlotStatus.AVAILABLE, False): MIX.future_available,
        (SlotStatus.EXPIRED, True): MIX.already_expired,
        (SlotStatus.ARCHIVED, True): MIX.archived,
    }
    assert len(slots) == MIX.total == 66


def test_the_default_mix_gives_1800_past_available_slots_among_2450() -> None:
    slots = demo_slots(NOW, DemoMix())

    backlog = [s for s in slots if s.status is SlotStatus.AVAILABLE and s.start_at <= NOW]
    assert len(backlog) == 1_800
    assert len(slots) == DemoMix().total == 2_450


def test_past_slots_start_before_now_within_three_days_and_future_ones_after_now() -> None:
    slots = demo_slots(NOW, MIX)
    future = [slot for slot in slots if slot.start_at > NOW]
    past = [slot for slot in slots if slot.start_at <= NOW]

    assert len(future) == MIX.future_available
    assert all(slot.status is SlotStatus.AVAILABLE for slot in future)
    assert all(slot.start_at <= NOW + timedelta(days=3) for slot in future)
    assert len(past) == MIX.total - MIX.future_available
    assert all(NOW - timedelta(days=3) <= slot.start_at < NOW for slot in past)


def test_every_slot_is_a_valid_row_version_1_created_before_it_starts() -> None:
    slots = demo_slots(NOW, MIX)

    assert len({slot.id for slot in slots}) == len(slots)
    for slot in slots:
        assert slot.end_at - slot.start_at == timedelta(minutes=30)
        assert slot.version == 1
        assert slot.created_at == slot.updated_at < slot.start_at
        assert slot.created_at <= NOW


def test_the_same_seed_gives_the_same_slots() -> None:
    assert demo_slots(NOW, MIX, seed=11) == demo_slots(NOW, MIX, seed=11)


def test_another_seed_gives_other_slots() -> None:
    first, second = demo_slots(NOW, MIX, seed=11), demo_slots(NOW, MIX, seed=12)

    assert {slot.id for slot in first}.isdisjoint(slot.id for slot in second)


def test_slots_spread_over_at_most_12_agencies_and_60_consultants() -> None:
    slots = demo_slots(NOW, DemoMix())

    assert 1 < len({slot.tenant_id for slot in slots}) <= 12
    assert 1 < len({slot.consultant_id for slot in slots}) <= 60
