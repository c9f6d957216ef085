"""The one line of a cycle cut short: what stopped it (with its SQLSTATE and fix), what
committed before, and whether a batch was in flight."""

from __future__ import annotations

import asyncio
from uuid import uuid4

import pytest

from slot_expiration.cli.progress import DrainSeen
from slot_expiration.cli.worker_commands import cut_short_line
from slot_expiration.db import CommitInDoubtError, MisconfiguredStoreError
from slot_expiration.domain import CycleOutcome
from slot_expiration.expiry import (
    DRAIN_COUNT_CAP,
    BatchCommitted,
    ClockSkewError,
    CycleFailed,
    DrainProgress,
    DrainStarted,
    outcome_of,
)
from slot_expiration.options import CycleOptions, load_settings
from tests.support.results import batch, ended

SETTINGS = load_settings(
    CycleOptions, environment=False, database_url="postgresql://w:pw@127.0.0.1/c"
)


def _cut(
    failure: BaseException,
    expired: int,
    batches: int,
    *,
    in_flight: bool,
    outcome: CycleOutcome | None = None,
) -> str:
    how = outcome or (
        CycleOutcome.INTERRUPTED
        if isinstance(failure, asyncio.CancelledError)
        else outcome_of(failure)
    )
    partial = ended(how, failure, batch_in_flight=in_flight, expired=expired, batches=batches)
    return cut_short_line(CycleFailed(partial), SETTINGS)


def test_an_interrupted_drain_says_what_committed_and_that_its_batch_rolled_back() -> None:
    line = _cut(asyncio.CancelledError(), 21_500, 43, in_flight=True)

    assert line == (
        "interrupted: 21500 rows expired in 43 committed batches; "
        "the batch in flight was rolled back"
    )


def test_an_interruption_during_the_pause_between_batches_had_none_in_flight() -> None:
    line = _cut(asyncio.CancelledError(), 500, 1, in_flight=False)

    assert line == "interrupted: 500 rows expired in 1 committed batch; no batch was in flight"


def test_a_drain_past_its_budget_names_the_budget_once() -> None:
    overrun = TimeoutError("the cycle ran past its budget of 30 s and …")

    line = _cut(overrun, 6_000, 12, in_flight=True, outcome=CycleOutcome.BUDGET_EXCEEDED)

    assert line == (
        "the cycle ran past its budget of 30 s: 6000 rows expired in 12 committed batches; "
        "the batch in flight was rolled back"
    )


def test_a_drain_past_its_budget_whose_batch_never_heard_back_says_it_may_have_committed() -> None:
    doubt = CommitInDoubtError("no answer to expire_batch and its COMMIT within 3 s")
    overrun = TimeoutError("the cycle ran past its budget of 30 s and …")
    overrun.__cause__ = doubt

    line = _cut(overrun, 6_000, 12, in_flight=True, outcome=CycleOutcome.BUDGET_EXCEEDED)

    assert line == (
        "the cycle ran past its budget of 30 s: 6000 rows expired in 12 committed batches; "
        "the batch in flight may or may not have committed"
    )


def test_a_misconfiguration_after_some_batches_keeps_its_sqlstate_and_its_fix() -> None:
    revoked = MisconfiguredStoreError("permission denied for table availability_slots", "42501")

    line = _cut(revoked, 1_500, 3, in_flight=True)

    assert line == (
        "permission denied for table availability_slots (SQLSTATE 42501); before it, "
        "1500 rows expired in 3 committed batches; the batch in flight was rolled back"
    )


@pytest.mark.parametrize(
    "failure",
    [ClockSkewError(7_200.0, 30.0), MisconfiguredStoreError("no UPDATE (status)", "42501")],
)
def test_a_failure_before_any_batch_is_its_own_line(failure: Exception) -> None:
    line = _cut(failure, 0, 0, in_flight=False)

    assert line.startswith(str(failure))
    assert "committed" not in line


def test_an_interrupted_drain_says_about_how_many_of_its_count_are_left_and_how_to_go_on() -> None:
    partial = ended(
        CycleOutcome.INTERRUPTED,
        asyncio.CancelledError(),
        batch_in_flight=True,
        expired=21_500,
        batches=43,
    )
    drain = DrainProgress(backlog_at_start=300_000, expired=21_500, seconds=9.0)

    line = cut_short_line(CycleFailed(partial), SETTINGS, drain)

    assert line == (
        "interrupted: 21500 rows expired in 43 committed batches; the batch in flight was "
        "rolled back; about 278,500 left: run again to go on"
    )


def test_a_drain_past_its_budget_whose_count_stopped_at_its_cap_says_at_least_what_is_left() -> (
    None
):
    overrun = TimeoutError("the cycle ran past its budget of 30 s and …")
    partial = ended(
        CycleOutcome.BUDGET_EXCEEDED, overrun, batch_in_flight=True, expired=6_000, batches=12
    )
    drain = DrainProgress(backlog_at_start=DRAIN_COUNT_CAP, expired=6_000, seconds=29.0)

    line = cut_short_line(CycleFailed(partial), SETTINGS, drain)

    assert line.endswith(
        f"; at least {DRAIN_COUNT_CAP - 6_000:,} left: run again or raise --max-cycle-seconds"
    )


def test_the_drain_seen_is_its_count_from_its_start_then_each_batch_committed() -> None:
    seen = DrainSeen()
    run_id = uuid4()

    seen(DrainStarted(run_id, 5))
    at_start = seen.latest
    seen(BatchCommitted(run_id, batch(expired=2), DrainProgress(5, 2, 0.1)))

    assert at_start is not None
    assert (at_start.backlog_at_start, at_start.left) == (5, 5)
    assert seen.latest == DrainProgress(5, 2, 0.1)
