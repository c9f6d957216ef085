"""Readiness: ready when the database answers and the schema is at the newest revision, or
ahead of it (a newer release migrated it); not when it is behind or not ours."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from uuid import uuid4

from slot_expiration.db.errors import (
    MisconfiguredStoreError,
    SchemaMissingError,
    TransientStoreError,
)
from slot_expiration.domain import CycleOutcome
from slot_expiration.domain.text import MAX_MESSAGE_CHARS
from slot_expiration.expiry import ClockSkewError, CycleEnded
from slot_expiration.telemetry.readiness import Readiness
from tests.support.history import cycle_record
from tests.support.results import AS_OF, cycle_result, ended

LATEST = "0002"


def _answering(revision: str | None) -> Readiness:
    async def schema_revision() -> str | None:
        return revision

    return Readiness(schema_revision, LATEST)


def _raising(error: Exception) -> Readiness:
    async def schema_revision() -> str | None:
        raise error

    return Readiness(schema_revision, LATEST)


async def test_a_database_at_the_newest_revision_is_ready() -> None:
    report = await _answering(LATEST).report()

    assert report.ready
    assert report.as_json() == {
        "ready": True,
        "detail": "database answers, schema up to date",
        "schema_revision": LATEST,
        "latest_revision": LATEST,
        "needs_a_person": False,
        "unrecorded_cycle": None,
        "pause": None,
    }


async def test_a_schema_behind_the_newest_revision_is_not_ready_and_says_to_migrate() -> None:
    report = await _answering("0001").report()

    assert not report.ready
    assert report.schema_revision == "0001"
    assert "the schema is at 0001, the newest is 0002" in report.detail
    assert "slot-expiration migrate" in report.detail


async def test_a_database_never_migrated_is_not_ready() -> None:
    report = await _raising(SchemaMissingError()).report()

    assert not report.ready
    assert "the schema is missing" in report.detail


async def test_a_database_that_refuses_us_is_not_ready_saying_what_the_server_said() -> None:
    error = MisconfiguredStoreError(
        'password authentication failed for user "x"', "28P01", connecting=True
    )

    report = await _raising(error).report()

    assert not report.ready
    # Nothing is masked in it (a password "x" once turned "exist" into "e***ist").
    assert report.detail == 'database: password authentication failed for user "x"'
    assert report.needs_a_person  # waiting will not cure a refused login


async def test_a_database_that_is_down_is_not_ready_and_no_person_is_asked_for_yet() -> None:
    error = TransientStoreError("connection refused", "08001", connecting=True)

    report = await _raising(error).report()

    assert (report.ready, report.needs_a_person) == (False, False)


async def test_a_database_that_does_not_answer_in_time_is_not_ready() -> None:
    never = asyncio.Event()

    async def schema_revision() -> str | None:
        await never.wait()
        return LATEST

    report = await Readiness(schema_revision, LATEST, timeout_seconds=0.01).report()

    assert not report.ready
    assert report.detail == "the database did not answer within 0.01 s"


async def test_probes_asked_while_one_runs_share_its_answer_and_one_database_session() -> None:
    probing, gate, asked = asyncio.Event(), asyncio.Event(), []

    async def schema_revision() -> str | None:
        asked.append(1)
        probing.set()
        await gate.wait()
        return LATEST

    readiness = Readiness(schema_revision, LATEST)
    burst = [asyncio.create_task(readiness.report()) for _ in range(10)]
    await probing.wait()  # all ten have asked: the probe started after them
    burst[0].cancel()  # one client gone: the others still get the answer
    gate.set()
    reports = await asyncio.gather(*burst[1:])
    later = await readiness.report()

    assert len(asked) == 2  # the burst's probe, then a new one for the later request
    assert all(report.ready for report in [*reports, later])


async def test_a_cycle_refused_for_the_clock_or_a_grant_makes_it_unready_until_a_success() -> None:
    readiness = _answering(LATEST)
    run_id = uuid4()

    readiness(ended(CycleOutcome.CLOCK_SKEW, ClockSkewError(7_200.0, 30.0), run_id=run_id))
    skewed = await readiness.report()
    transient = TransientStoreError("server closed the connection", "08006")
    readiness(ended(CycleOutcome.FAILED, transient, run_id=run_id))
    still = await readiness.report()
    readiness(CycleEnded(cycle_result()))
    recovered = await readiness.report()

    assert not skewed.ready
    assert skewed.detail.startswith("the last cycle failed, clock_skew: the worker's clock is")
    assert not still.ready  # a transient failure says nothing of the clock or the grants
    assert recovered.ready


async def test_the_reason_of_a_misconfigured_cycle_is_served_as_the_server_said_it() -> None:
    readiness = Readiness(_revision_at(LATEST), LATEST)
    error = MisconfiguredStoreError('password authentication failed for user "x"', "28P01")

    readiness(ended(CycleOutcome.MISCONFIGURED, error))
    report = await readiness.report()

    assert not report.ready
    assert report.needs_a_person
    assert report.detail == (
        "the last cycle failed, misconfigured (SQLSTATE 28P01): password authentication "
        'failed for user "x"'
    )
    assert report.schema_revision == LATEST  # the schema itself is fine, and said so


async def test_a_cycle_the_history_could_not_take_is_served_until_a_later_row_is_written() -> None:
    """A replica whose login is refused records nothing in the history, not even its
    failures: /readyz is where its latest cycle is told."""
    readiness = _answering(LATEST)
    lost = cycle_record(AS_OF, CycleOutcome.MISCONFIGURED, instance="a:1")
    older = cycle_record(AS_OF - timedelta(minutes=5), instance="a:1")
    later = cycle_record(AS_OF + timedelta(minutes=5), instance="a:1")

    readiness.history_written(lost, 'password authentication failed for user "w" (SQLSTATE 28P01)')
    told = (await readiness.report()).as_json()["unrecorded_cycle"]
    readiness.history_written(older, None)  # a slow write of an earlier row lands late
    still = (await readiness.report()).unrecorded_cycle
    readiness.history_written(later, None)
    cleared = (await readiness.report()).unrecorded_cycle

    assert told == {
        "run_id": str(lost.run_id),
        "outcome": "misconfigured",
        "ended_at": AS_OF.isoformat(),
        "error": 'password authentication failed for user "w" (SQLSTATE 28P01)',
    }
    assert still is not None
    assert cleared is None


async def test_a_megabyte_reason_is_served_in_500_characters() -> None:
    readiness = Readiness(_revision_at(LATEST), LATEST)
    error = MisconfiguredStoreError("no: " + "z" * 1_000_000, "42501")

    readiness(ended(CycleOutcome.MISCONFIGURED, error))
    readiness.history_written(cycle_record(AS_OF), "refused: " + "z" * 1_000_000)
    report = await readiness.report()

    assert len(report.detail) == MAX_MESSAGE_CHARS
    assert report.unrecorded_cycle is not None
    assert len(report.unrecorded_cycle.error) == MAX_MESSAGE_CHARS


def _revision_at(revision: str) -> Callable[[], Awaitable[str | None]]:
    async def schema_revision() -> str | None:
        return revision

    return schema_revision


async def test_a_schema_ahead_of_this_release_is_ready_and_says_so() -> None:
    # A newer release migrated first (a rolling deploy, a rollback): migrations only add.
    report = await _answering("0007").report()

    assert report.ready
    assert report.schema_revision == "0007"
    assert report.detail == (
        "database answers, schema ahead of this release (0007 > 0002): migrations only add, "
        "so this release runs on it"
    )


async def test_a_revision_not_of_this_product_is_not_ready() -> None:
    report = await _answering("ae1027a6acf").report()

    assert not report.ready
    assert report.detail == (
        "the schema is at revision 'ae1027a6acf', which is not a revision of slot-expiration"
    )
