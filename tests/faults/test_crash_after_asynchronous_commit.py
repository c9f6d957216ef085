"""Crashes of a durable server under a worker that commits without waiting for the WAL flush.

The server here is durable (fsync, full_page_writes and synchronous_commit at PostgreSQL's
defaults): the worker's `SET LOCAL synchronous_commit = off` alone makes its commits
asynchronous, while the test's own writes are flushed. A crash is `pg_ctl stop -m immediate`
or a SIGKILL of the postmaster: neither writes the WAL still in the server's memory, so a
batch the worker reported committed may be undone. What must hold after every crash:

- every row the worker owes is `Expired` with its version up by one, or `Available` with its
  old version: never anything else;
- the rows the worker reported expired, less those the crash undid, plus at most the one batch
  whose COMMIT reached the server unanswered, are the rows Expired;
- the next cycles expire what is left (an undone expiry again, once: every version rises by
  exactly one in the end);
- a poison row is never expired, and its quarantine entry, if the crash undid it, only makes
  it tried again sooner (its recorded attempts never exceed the rejections logged).

One test makes the loss certain: the WAL writer is frozen (SIGSTOP) so nothing writes a
committed batch's WAL before the crash, and with `--synchronous-commit on` the same batch
survives. The other crashes the server at random points of a drain at the worker's default
batch sizes (500, then 2,000 a batch), with poison rows in it; its seed is in the report. A
third fails over, at a random point of such a drain, to a standby fed by asynchronous
streaming replication: what the standby had not received is undone and redone once.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from uuid import UUID

import pytest

from slot_expiration.domain import SlotStatus
from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.options.settings import DEFAULT_DRAIN_BATCH_SIZE
from slot_expiration.schema.migrate import upgrade
from tests.conftest import scratch_database, upgrade_template
from tests.e2e.command import Finished, Running, started, with_password
from tests.faults.conftest import Measure
from tests.faults.workers import (
    FaultBooks,
    Record,
    events_of,
    overdue,
    reported_expired,
    run_args,
    stopped,
    waiting_on_gate,
)
from tests.support.database import Row, SlotDatabase
from tests.support.ledger import Ledger
from tests.support.servers import ControlledServer, hot_standby, promote

pytestmark = pytest.mark.faults

# PostgreSQL's durable defaults, and nothing else that writes the WAL behind the worker's
# commits on its own schedule: no timed checkpoint and no background writer during a test,
# so only the WAL writer (or a later synchronous commit) makes an asynchronous commit durable.
DURABLE_SERVER = ("checkpoint_timeout=1h", "bgwriter_lru_maxpages=0")
CERTAIN_BATCH = 25
# The drains run at the worker's defaults: a cycle's first batch of 500, then 2,000 a batch.
DRAIN_BATCH = DEFAULT_DRAIN_BATCH_SIZE
DRAIN_ROWS, POISON_ROWS = 20 * DRAIN_BATCH, 3
CRASHES = 4
CRASH_DEADLINE_SECONDS = 60.0


@pytest.fixture(scope="module")
def durable_server() -> Iterator[ControlledServer]:
    with EmbeddedPostgres(settings=DURABLE_SERVER) as server:
        upgrade_template(server)
        yield ControlledServer(server)


@pytest.fixture
def durable_url(durable_server: ControlledServer) -> Iterator[str]:
    durable_server.start()
    with scratch_database(durable_server.server, "crash") as url:
        yield url
        durable_server.start()  # dropping the database needs the server up


async def wal_writer_pid(db: SlotDatabase) -> int:
    cursor = await db.conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'"
    )
    row = await cursor.fetchone()
    assert row is not None, "no WAL writer"
    return int(row[0])


@dataclass(frozen=True, slots=True)
class AfterCrash:
    """The owed rows as the restarted server has them."""

    expired: frozenset[UUID]  # Expired, version up by one
    available: frozenset[UUID]  # Available, old version
    other: dict[UUID, str]  # anything else: what it is

    @classmethod
    def of(cls, ledger: Ledger, rows: dict[UUID, Row]) -> AfterCrash:
        expired, available, other = set(), set(), {}
        for slot_id in ledger.due:
            old, new = ledger.before[slot_id], rows.get(slot_id)
            if new is None:
                other[slot_id] = "missing"
            elif new.status is SlotStatus.EXPIRED and new.version == old.version + 1:
                expired.add(slot_id)
            elif new.status is SlotStatus.AVAILABLE and new.version == old.version:
                available.add(slot_id)
            else:
                other[slot_id] = f"{new.status.value}, version {old.version} -> {new.version}"
        return cls(frozenset(expired), frozenset(available), other)


def untouched(ledger: Ledger, rows: dict[UUID, Row], slot_ids: Sequence[UUID]) -> list[UUID]:
    """Of these rows (not owed), those that changed at all."""
    return [i for i in slot_ids if rows[i] != ledger.before[i]]


@pytest.mark.parametrize("synchronous_commit", ["off", "on"])
async def test_a_batch_reported_committed_is_undone_by_a_crash_only_when_commits_do_not_wait(
    durable_server: ControlledServer,
    durable_url: str,
    record_fault: Record,
    synchronous_commit: str,
) -> None:
    url = with_password(durable_url)
    choice = () if synchronous_commit == "off" else ("--synchronous-commit", "on")  # off: default
    args = run_args(url, "--max-batches-per-cycle", "0", *choice, batch_size=CERTAIN_BATCH)
    async with SlotDatabase.open(durable_url) as db:
        slots = await db.insert(overdue(2 * CERTAIN_BATCH))
        books = await FaultBooks.open(db, slots, record_fault)
        await db.install_gate_for([s.id for s in slots[CERTAIN_BATCH:]])  # the second batch
        await db.close_gate()
        os.kill(await wal_writer_pid(db), signal.SIGSTOP)
        async with started(*args) as worker:
            await worker.until(
                lambda: worker.logged("batch.selected") and waiting_on_gate(db),
                "the first batch committed, the second waiting on the gate",
            )
            reported_before = reported_expired([worker])
            # The postmaster SIGKILLs the frozen WAL writer after its 5 s grace.
            durable_server.stop("immediate")
            first = await stopped(worker)
    durable_server.start()
    async with SlotDatabase.open(durable_url) as db:
        after_crash = AfterCrash.of(books.ledger, await db.rows())
        async with started(*run_args(url, "--max-batches-per-cycle", "0", *choice)) as again:
            back = time.monotonic()
            recovery = await books.drain_time(db, [again], back)
            second = await stopped(again)
        after = await db.rows()

    undone = reported_before - len(after_crash.expired)
    audit = books.close(
        after,
        [first, second],
        fault=f"server crashed right after a reported batch, synchronous commit "
        f"{synchronous_commit}",
        injection=f"the WAL writer frozen (SIGSTOP), a batch of {CERTAIN_BATCH} committed and "
        "logged, the next held inside its UPDATE; pg_ctl stop -m immediate; a new worker started",
        recovery=recovery,
        note=f"from the new worker's launch; {undone} of the {reported_before} expiries reported "
        "before the crash were undone by it and expired again once",
    )
    assert reported_before == CERTAIN_BATCH, first.describe()
    assert not after_crash.other, after_crash.other
    if synchronous_commit == "off":
        assert after_crash.expired == frozenset(), "a batch whose WAL was never written survived"
    else:
        assert after_crash.expired == frozenset(s.id for s in slots[:CERTAIN_BATCH])
    assert audit.rows_kept, audit.describe()
    assert audit.unreported == -undone, audit.describe()  # each undone expiry redone once


@dataclass(frozen=True, slots=True)
class Crash:
    """One crash of the random test, as the report shows it."""

    number: int
    mode: str
    batches_before: int  # batches the worker logged before the crash
    reported: int  # expiries reported so far, by every worker
    expired: int  # rows Expired after the restart
    undone: int  # reported, then undone by this crash
    unanswered: int  # committed by this crash's worker, never reported
    quarantine_lost: int  # poison rows rejected before, not in quarantine after the restart

    def row(self, seed: int) -> dict[str, object]:
        return {
            "crash": f"{self.number} ({self.mode}, seed {seed})",
            "batches logged before it": self.batches_before,
            "expiries reported so far": self.reported,
            "rows Expired after the restart": self.expired,
            "undone by the crash (expired again later)": self.undone,
            "committed, never reported": self.unanswered,
            "poison rows rejected, not in quarantine after it": self.quarantine_lost,
        }


async def crash_at_a_random_point(
    server: ControlledServer, worker: Running, mode: str, rng: random.Random, batches: int
) -> int:
    """Crash once the worker has logged a random number of batches (from 0 to `batches`);
    the number logged when the crash came."""
    point = rng.randint(0, batches)
    await worker.until(
        lambda: len(events_of(worker, "batch.selected")) >= point,
        f"{point} batches logged",
        CRASH_DEADLINE_SECONDS,
    )
    if mode == "immediate":
        server.stop("immediate")
    else:
        server.kill()
    return len(events_of(worker, "batch.selected"))


def rejections(workers: Sequence[Finished], slot_id: UUID) -> int:
    """item.failed lines for this slot in the workers' logs."""
    return sum(
        1
        for worker in workers
        for event in events_of(worker, "item.failed")
        if event.get("slot_id") == str(slot_id)
    )


@pytest.mark.parametrize("mode", ["immediate", "kill"])
async def test_crashes_at_random_points_of_a_drain_lose_nothing_and_redo_an_undone_expiry_once(
    durable_server: ControlledServer,
    durable_url: str,
    record_fault: Record,
    measure: Measure,
    mode: str,
) -> None:
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)  # noqa: S311 - crash points, not secrets: the seed reproduces them
    url = with_password(durable_url)
    args = run_args(url, "--max-batches-per-cycle", "0", batch_size=None)
    async with SlotDatabase.open(durable_url) as db:
        slots = await db.insert(overdue(DRAIN_ROWS + POISON_ROWS))
        # Among the first batches: quarantined before the first crash can come.
        poison = [s.id for s in rng.sample(slots[: 10 * DRAIN_BATCH], POISON_ROWS)]
        books = await FaultBooks.open(db, [s for s in slots if s.id not in poison], record_fault)
        ledger = books.ledger
        await db.install_poison_trigger(poison, "P0001")
    workers: list[Finished] = []
    crashes: list[Crash] = []
    undone = unanswered = 0
    for number in range(1, CRASHES + 1):
        durable_server.start()
        async with started(*args) as worker:
            # Each crash within its share of what is left, so that the last leaves a backlog
            # for the recovery too.
            left = len(ledger.due) - (crashes[-1].expired if crashes else 0)
            share = left // DRAIN_BATCH // (CRASHES - number + 2)
            batches = await crash_at_a_random_point(durable_server, worker, mode, rng, share)
            workers.append(await stopped(worker))
        durable_server.start()
        async with SlotDatabase.open(durable_url) as db:
            rows, quarantine = await db.rows(), await db.quarantine()
        state = AfterCrash.of(ledger, rows)
        assert not state.other, (seed, state.other)
        assert not untouched(ledger, rows, poison), (seed, "a poison row changed")
        reported = reported_expired(workers)
        # What this crash did: the expiries reported before it and missing after it were
        # undone, or one batch committed whose answer never came (never both: a later
        # commit in the WAL makes every earlier one durable).
        difference = reported - undone + unanswered - len(state.expired)
        crash = Crash(
            number,
            mode,
            batches,
            reported,
            len(state.expired),
            max(difference, 0),
            max(-difference, 0),
            sum(1 for i in poison if rejections(workers, i) and i not in quarantine),
        )
        undone, unanswered = undone + crash.undone, unanswered + crash.unanswered
        crashes.append(crash)
        assert crash.unanswered <= DRAIN_BATCH, (seed, crash)
        for slot_id in poison:
            attempts = quarantine[slot_id].attempts if slot_id in quarantine else 0
            assert attempts <= rejections(workers, slot_id), (seed, slot_id)
    durable_server.start()
    async with SlotDatabase.open(durable_url) as db:
        async with started(*args) as last:
            back = time.monotonic()
            recovery = await books.drain_time(db, [last], back)
            workers.append(await stopped(last))
        after, quarantine = await db.rows(), await db.quarantine()

    for crash in crashes:
        measure("crash-points", crash.row(seed))
    how = "pg_ctl stop -m immediate" if mode == "immediate" else "SIGKILL of the postmaster"
    audit = books.close(
        after,
        workers,
        fault=f"server crashed ({mode}) at {CRASHES} random points of a drain, commits "
        "asynchronous",
        injection=f"{how} after a random number of batches at the default sizes (500, then "
        f"{DRAIN_BATCH}; {DRAIN_ROWS} rows and {POISON_ROWS} poison rows), {CRASHES} times, a "
        f"new worker each time; seed {seed}",
        recovery=recovery,
        note=f"from the last restart; {undone} expiries undone by the crashes and expired again "
        f"once, {unanswered} committed without an answer, "
        f"{sum(c.quarantine_lost for c in crashes)} quarantine entries undone",
    )
    assert audit.rows_kept, (seed, audit.describe())
    assert audit.unreported == unanswered - undone, (seed, audit.describe())
    assert not untouched(ledger, after, poison), seed
    assert set(quarantine) == set(poison), seed
    for slot_id in poison:
        assert quarantine[slot_id].attempts <= rejections(workers, slot_id), (seed, slot_id)


@dataclass(frozen=True, slots=True)
class Failover:
    """The failover test's run, as the report shows it."""

    batches_before: int  # batches the worker logged before the primary died
    reported: int  # expiries the first worker reported
    on_standby: int  # rows Expired on the standby once promoted
    undone: int  # reported, missing on the promoted standby (expired again later)
    unanswered: int  # committed and streamed, never reported

    def row(self, seed: int) -> dict[str, object]:
        return {
            "failover": f"primary killed (seed {seed})",
            "batches logged before it": self.batches_before,
            "expiries reported": self.reported,
            "rows Expired on the promoted standby": self.on_standby,
            "undone by the failover (expired again later)": self.undone,
            "committed, never reported": self.unanswered,
        }


async def test_a_failover_to_an_asynchronous_standby_mid_drain_redoes_what_it_undid_once(
    record_fault: Record, measure: Measure
) -> None:
    """A durable primary streams to a hot standby (asynchronous: PostgreSQL's default); the
    worker drains at the default batch sizes; the primary's postmaster is killed after a
    random number of batches and the standby promoted; a worker on it drains the rest."""
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)  # noqa: S311 - the failover point, not a secret
    drain = ("--max-batches-per-cycle", "0")
    with EmbeddedPostgres(settings=DURABLE_SERVER) as primary:
        upgrade(primary.url)
        async with SlotDatabase.open(primary.url) as db:
            books = await FaultBooks.open(db, await db.insert(overdue(DRAIN_ROWS)), record_fault)
        with hot_standby(primary) as standby:
            server = ControlledServer(primary)
            url = with_password(primary.url)
            async with started(*run_args(url, *drain, batch_size=None)) as worker:
                batches = await crash_at_a_random_point(
                    server, worker, "kill", rng, DRAIN_ROWS // DRAIN_BATCH // 2
                )
                first = await stopped(worker)
            promote(standby)
            failed_over = time.monotonic()
            async with SlotDatabase.open(standby.url) as db:
                after_failover = AfterCrash.of(books.ledger, await db.rows())
                url = with_password(standby.url)
                async with started(*run_args(url, *drain, batch_size=None)) as again:
                    recovery = await books.drain_time(db, [again], failed_over)
                    second = await stopped(again)
                after = await db.rows()

    reported = reported_expired([first])
    difference = reported - len(after_failover.expired)
    failover = Failover(
        batches, reported, len(after_failover.expired), max(difference, 0), max(-difference, 0)
    )
    measure("failover-points", failover.row(seed))
    audit = books.close(
        after,
        [first, second],
        fault="failover to an asynchronous standby mid-drain, commits asynchronous",
        injection="a durable primary streaming to a hot standby (pg_basebackup -R, "
        f"asynchronous); the worker drains {DRAIN_ROWS} rows at the default batch sizes; "
        "SIGKILL of the primary's postmaster after a random number of batches, pg_promote() on "
        f"the standby, a new worker on it; seed {seed}",
        recovery=recovery,
        note=f"from the promotion; {failover.undone} of the {reported} expiries reported before "
        f"the failover were not on the standby and were expired again once, "
        f"{failover.unanswered} committed without an answer",
    )
    assert not after_failover.other, (seed, after_failover.other)
    assert failover.unanswered <= DRAIN_BATCH, (seed, failover)
    assert audit.rows_kept, (seed, audit.describe())
    assert audit.unreported == failover.unanswered - failover.undone, (seed, audit.describe())
