"""Hypothesis drives publish, book, archive, worker cycles and clock moves against the real
database; after every step the slot table keeps the context's invariants, and every
operation answers what a simple model of the rules predicts."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from slot_expiration.domain import SlotRuleError, SlotStatus, is_terminal, require_transition
from slot_expiration.slots import MAX_SLOT_DURATION, SlotOperations, SlotPolicy, SlotRange
from tests.support.cycles import run_cycle
from tests.support.database import SlotDatabase
from tests.support.slot_context import Clock
from tests.support.slots import AS_OF

pytestmark = pytest.mark.integration

TENANTS = (UUID(int=1), UUID(int=2))
CONSULTANTS = (UUID(int=11), UUID(int=12))
POLICY = SlotPolicy(horizon=timedelta(days=2), min_lead_time=timedelta(minutes=10))
OCCUPYING = {SlotStatus.AVAILABLE, SlotStatus.BOOKED}
PEOPLE = [(tenant, consultant) for tenant in TENANTS for consultant in CONSULTANTS]
# The simulated clock is not the host's: it runs ahead at will, so its skew is not checked.
SIMULATED = 10 * 365 * 86_400.0

# A publication's shape, in steps of 10 minutes: the first slot's start from now, then
# each slot's length and its gap to the next. Mostly valid, soon and in sequence, so
# that new slots meet those the clock has reached; sometimes in the past, past the
# horizon, inverted or overlapping.
SHAPES = st.tuples(
    st.one_of(st.integers(1, 30), st.integers(-3, 300)),
    st.lists(
        st.tuples(
            st.one_of(st.integers(1, 24), st.integers(-1, 24)),
            st.one_of(st.integers(0, 6), st.integers(-4, 6)),
        ),
        min_size=1,
        max_size=3,
    ),
)


@dataclass(frozen=True, slots=True)
class Known:
    """The model's view of one slot."""

    tenant_id: UUID
    consultant_id: UUID
    start_at: datetime
    end_at: datetime
    status: SlotStatus
    version: int


@dataclass(frozen=True, slots=True)
class Stored:
    """A row as the database has it."""

    tenant_id: UUID
    consultant_id: UUID
    start_at: datetime
    end_at: datetime
    status: SlotStatus
    version: int
    updated_at: datetime


def expected_publish_code(batch: list[SlotRange], now: datetime, taken: list[Known]) -> str | None:
    """The rules, restated plainly: the first code that applies, or None."""
    pairs = [(a, b) for i, a in enumerate(batch) for b in batch[i + 1 :]]
    occupied = [SlotRange(k.start_at, k.end_at) for k in taken]
    checks = [
        ("CAL_SLOT_BATCH_EMPTY", not batch),
        ("CAL_SLOT_INVALID_RANGE", any(r.end_at <= r.start_at for r in batch)),
        ("CAL_SLOT_TOO_LONG", any(r.end_at - r.start_at > MAX_SLOT_DURATION for r in batch)),
        ("CAL_SLOT_START_IN_PAST", any(r.start_at <= now for r in batch)),
        ("CAL_SLOT_BEYOND_HORIZON", any(r.start_at > now + POLICY.horizon for r in batch)),
        ("CAL_SLOT_OVERLAP", any(a.overlaps(b) for a, b in pairs)),
        ("CAL_SLOT_OVERLAP", any(r.overlaps(o) for r in batch for o in occupied)),
    ]
    return next((code for code, broken in checks if broken), None)


class SlotLifecycle(RuleBasedStateMachine):
    """One example: an empty table, a clock at AS_OF, an opening calendar, and a few dozen
    steps. Hypothesis enables a different subset of the rules in each example."""

    url = ""  # set by the test before the machine runs
    slots = Bundle("slots")

    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.stack = AsyncExitStack()
        self.clock = Clock(AS_OF)
        self.model: dict[UUID, Known] = {}
        self.expired_as_of: dict[UUID, datetime] = {}
        self.seen: dict[UUID, Stored] = {}
        self.runner.run(self._open())

    async def _open(self) -> None:
        self.db = await self.stack.enter_async_context(SlotDatabase.open(self.url))
        await self.db.execute("TRUNCATE availability_slots CASCADE")
        self.ops = await self.stack.enter_async_context(
            SlotOperations.connect(self.url, POLICY, self.clock)
        )

    def teardown(self) -> None:
        self.runner.run(self.stack.aclose())
        self.runner.close()

    def _run(self, coroutine: Any) -> Any:
        return self.runner.run(coroutine)

    def _outcome(self, coroutine: Any) -> Any:
        try:
            return self._run(coroutine)
        except SlotRuleError as refused:
            return refused

    @initialize(target=slots, shapes=st.lists(SHAPES, min_size=4, max_size=4))
    def opening_calendar(self, shapes: list[tuple[int, list[tuple[int, int]]]]) -> Any:
        """Every example starts with a calendar: a publication for each consultant of
        each tenant (whichever the rules accept), so every rule has slots to act on."""
        assert self._stored() == {}
        published = []
        for (tenant, consultant), (first, shape) in zip(PEOPLE, shapes, strict=True):
            published += self._publish(tenant, consultant, first, shape)
        return multiple(*published)

    @rule(
        target=slots,
        tenant=st.sampled_from(TENANTS),
        consultant=st.sampled_from(CONSULTANTS),
        first_and_shape=SHAPES,
    )
    def publish(
        self, tenant: UUID, consultant: UUID, first_and_shape: tuple[int, list[tuple[int, int]]]
    ) -> Any:
        return multiple(*self._publish(tenant, consultant, *first_and_shape))

    def _publish(
        self, tenant: UUID, consultant: UUID, first: int, shape: list[tuple[int, int]]
    ) -> list[UUID]:
        now, start, batch = self.clock.now, first, []
        for length, gap in shape:
            begin = now + timedelta(minutes=10 * start)
            batch.append(SlotRange(begin, begin + timedelta(minutes=10 * length)))
            start += length + gap
        taken = [
            k
            for k in self.model.values()
            if (k.tenant_id, k.consultant_id) == (tenant, consultant) and k.status in OCCUPYING
        ]
        expected = expected_publish_code(batch, now, taken)
        outcome = self._outcome(self.ops.publish(tenant, consultant, batch))

        if expected is not None:
            assert isinstance(outcome, SlotRuleError), outcome
            assert outcome.code == expected
            return []
        assert isinstance(outcome, list), outcome
        for slot in outcome:
            self.model[slot.id] = Known(
                tenant, consultant, slot.start_at, slot.end_at, SlotStatus.AVAILABLE, 1
            )
        return [slot.id for slot in outcome]

    @rule(
        slot_id=st.one_of(slots, slots, st.uuids()),
        action=st.sampled_from(["book", "archive"]),
        as_owner=st.booleans(),
    )
    def act_on_a_slot(self, slot_id: UUID, action: str, as_owner: bool) -> None:
        """A customer books, or an agent archives, a slot of theirs, another tenant's, or
        an id nobody published."""
        known = self.model.get(slot_id)
        mine = known is not None and as_owner
        tenant = self._tenant(known, as_owner)
        if action == "book":
            self._book(slot_id, tenant, known if mine else None)
        else:
            self._archive(slot_id, tenant, known if mine else None)

    def _book(self, slot_id: UUID, tenant: UUID, known: Known | None) -> None:
        outcome = self._outcome(self.ops.book(tenant, slot_id))
        if known is None or known.status is not SlotStatus.AVAILABLE:
            assert getattr(outcome, "code", None) == "CAL_SLOT_NOT_AVAILABLE", outcome
        elif known.start_at < self.clock.now + POLICY.min_lead_time:
            assert getattr(outcome, "code", None) == "CAL_SLOT_LEAD_TIME_VIOLATION", outcome
        else:
            assert not isinstance(outcome, SlotRuleError), outcome
            self._moved(slot_id, SlotStatus.BOOKED)

    def _archive(self, slot_id: UUID, tenant: UUID, known: Known | None) -> None:
        outcome = self._outcome(self.ops.archive(tenant, slot_id))
        if known is None:
            assert getattr(outcome, "code", None) == "CAL_SLOT_NOT_FOUND", outcome
        elif known.status in {SlotStatus.AVAILABLE, SlotStatus.EXPIRED}:
            assert not isinstance(outcome, SlotRuleError), outcome
            self._moved(slot_id, SlotStatus.ARCHIVED)
        else:
            assert getattr(outcome, "code", None) == "CAL_SLOT_FORBIDDEN_TRANSITION", outcome

    @rule(
        lag_minutes=st.one_of(st.just(0), st.integers(1, 120)),
        batch_size=st.sampled_from([2, 50]),
    )
    def worker_cycle(self, lag_minutes: int, batch_size: int) -> None:
        """A cycle whose AsOf is the clock or a little behind it (a slow worker); a small
        batch leaves a backlog, oldest first."""
        as_of = self.clock.now - timedelta(minutes=lag_minutes)
        due = sorted(
            (k.start_at, slot_id)
            for slot_id, k in self.model.items()
            if k.status is SlotStatus.AVAILABLE and k.start_at <= as_of
        )[:batch_size]
        # The simulated clock runs ahead of the host's at will: its skew is not checked.
        outcome = self._run(
            run_cycle(
                self.url,
                batch_size,
                as_of,
                clock=self.clock,
                max_clock_skew_seconds=SIMULATED,
                witness=True,
            )
        )

        assert [ref.id for ref in outcome.expired] == [slot_id for _, slot_id in due]
        for _, slot_id in due:
            self._moved(slot_id, SlotStatus.EXPIRED)
            self.expired_as_of[slot_id] = as_of

    @rule(
        minutes=st.integers(1, 180),
        into_a_slot=st.booleans(),
        pick=st.integers(0, 100),
    )
    def move_clock(self, minutes: int, into_a_slot: bool, pick: int) -> None:
        """Time passes: some minutes, or up to a moment inside a slot that has not started
        yet (the boundary where expiry, booking and new publications meet)."""
        future = sorted(k.start_at for k in self.model.values() if k.start_at > self.clock.now)
        if into_a_slot and future:
            self.clock.now = future[pick % len(future)] + timedelta(minutes=minutes % 20)
        else:
            self.clock.advance(timedelta(minutes=minutes))

    def _tenant(self, known: Known | None, as_owner: bool) -> UUID:
        owner = known.tenant_id if known else TENANTS[0]
        return owner if as_owner else next(t for t in TENANTS if t != owner)

    def _moved(self, slot_id: UUID, status: SlotStatus) -> None:
        known = self.model[slot_id]
        self.model[slot_id] = replace(known, status=status, version=known.version + 1)

    def _stored(self) -> dict[UUID, Stored]:
        rows = self._run(self._read())
        return {
            row[0]: Stored(row[1], row[2], row[3], row[4], SlotStatus(row[5]), *row[6:])
            for row in rows
        }

    async def _read(self) -> list[tuple[Any, ...]]:
        cursor = await self.db.conn.execute(
            "SELECT id, tenant_id, consultant_id, start_at, end_at, status, version, updated_at "
            "FROM availability_slots"
        )
        return await cursor.fetchall()

    @invariant()
    def table_keeps_the_invariants(self) -> None:
        now = self._stored()
        # The database holds exactly what the model says.
        assert {i: (s.status, s.version) for i, s in now.items()} == {
            i: (k.status, k.version) for i, k in self.model.items()
        }
        # No overlapping Available/Booked pair per consultant (INV-SLT-2).
        occupying = sorted(
            ((s.tenant_id, s.consultant_id), s.start_at, s.end_at)
            for s in now.values()
            if s.status in OCCUPYING
        )
        for (who, _, end), (other, start, _) in pairwise(occupying):
            assert who != other or end <= start
        # Expired only with start_at <= the AsOf that expired it.
        for slot_id, s in now.items():
            if s.status is SlotStatus.EXPIRED:
                assert s.start_at <= self.expired_as_of[slot_id]
        # Since the last step: a changed status is one allowed transition and one version
        # up; an unchanged one is untouched (so the worker never touched a Booked slot);
        # a terminal status (Booked, Archived) stays.
        for slot_id, before in self.seen.items():
            after = now[slot_id]
            if after.status is before.status:
                assert (after.version, after.updated_at) == (before.version, before.updated_at)
            else:
                assert not is_terminal(before.status)
                require_transition(before.status, after.status)
                assert after.version == before.version + 1
        self.seen = now


def test_the_slot_table_keeps_its_invariants_under_any_sequence_of_operations(
    database_url: str,
) -> None:
    SlotLifecycle.url = database_url
    run_state_machine_as_test(
        SlotLifecycle,
        settings=settings(
            max_examples=60,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
