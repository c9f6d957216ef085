"""Running the real worker under a fault, and reading what its cycles reported."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, Self
from uuid import UUID

from slot_expiration.domain import Slot
from tests.e2e.command import POLL_SECONDS, Finished, Running
from tests.support.database import Row, SlotDatabase
from tests.support.fault_report import FaultFigures
from tests.support.ledger import Audit, Ledger
from tests.support.slots import make_slot

# A short interval keeps recovery quick in tests; production ticks every 300 s.
INTERVAL_SECONDS = "1"  # the shortest `run` accepts
RECOVERY_TIMEOUT_SECONDS = 60.0
MESSAGE_CHARS = 200


def run_args(
    url: str, *extra: str, batch_size: int | None = 25, interval: str = INTERVAL_SECONDS
) -> tuple[str, ...]:
    """`run` on `url`, ticking every `interval`, with batches (drain batches too) of
    `batch_size` rows, or of the worker's defaults when None."""
    sizes: tuple[str, ...] = ()
    if batch_size is not None:
        sizes = ("--batch-size", str(batch_size), "--drain-batch-size", str(batch_size))
    return ("run", "--interval-seconds", interval, *sizes, "--database-url", url, *extra)


def overdue(count: int) -> list[Slot]:
    """`count` slots that started within the last hours, on the real clock (`run` uses it)."""
    now = datetime.now(UTC)
    return [make_slot(timedelta(minutes=-(count - i) - 1), as_of=now) for i in range(count)]


def events_of(command: Running | Finished, name: str) -> list[dict[str, Any]]:
    return [event for event in command.log_events() if event.get("event") == name]


def reported_expired(commands: Iterable[Running | Finished]) -> int:
    """The rows these commands' logs say they expired: the sum of `expired_count` over the
    cycles they completed, plus, for a cycle that failed after committing some batches
    (drain mode), what those batches reported (`batch.selected` count less the batch's
    `item.failed` lines: each batch is logged when it commits)."""
    return sum(_expired_in(run) for c in commands for run in _by_run(c.log_events()).values())


def _by_run(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        if "run_id" in event:
            runs.setdefault(str(event["run_id"]), []).append(event)
    return runs


def _expired_in(run: list[dict[str, Any]]) -> int:
    completed = [e for e in run if e["event"] == "cycle.completed"]
    if completed:
        return int(completed[0]["expired_count"])
    selected = sum(int(e["count"]) for e in run if e["event"] == "batch.selected")
    return selected - sum(1 for e in run if e["event"] == "item.failed")


def logged_failures(fault: str, commands: Iterable[Running | Finished]) -> dict[str, object]:
    """What the worker's `cycle.failed` lines said during a fault, for the operator's table."""
    failures = [e for c in commands for e in events_of(c, "cycle.failed")]
    kinds = Counter(
        f"{e['reason']}, {e['error_type']}: {str(e['exception'])[:MESSAGE_CHARS]}" for e in failures
    )
    return {
        "fault": fault,
        "failed cycles": len(failures),
        "cycle.failed (reason, error_type: exception)": "; ".join(
            f"{count}x {kind}" for kind, count in kinds.most_common()
        )
        or "—",
    }


def failed_cycles(command: Running | Finished) -> int:
    return len(events_of(command, "cycle.failed"))


async def waiting_on_gate(db: SlotDatabase, workers: int = 1) -> bool:
    return await db.worker_sessions(waiting_on_gate=True) == workers


async def drained(db: SlotDatabase, ledger: Ledger) -> bool:
    return not ledger.pending(await db.statuses())


async def at_risk(db: SlotDatabase, ledger: Ledger) -> int:
    """Due rows not expired yet: what a fault striking now could lose or do twice."""
    return len(ledger.pending(await db.statuses()))


async def drain_time(
    db: SlotDatabase,
    ledger: Ledger,
    workers: Sequence[Running],
    since: float,
    timeout_seconds: float = RECOVERY_TIMEOUT_SECONDS,
) -> float | None:
    """Seconds from `since` (monotonic) until every due row is Expired, or None if that
    did not happen in time or a worker exited first: the audit then shows the rows lost."""
    while not await drained(db, ledger):
        if any(worker.exited for worker in workers):
            return None
        if time.monotonic() - since > timeout_seconds:
            return None
        # Another session's state has no event to wait on: polling is the only way.
        await asyncio.sleep(POLL_SECONDS)
    return time.monotonic() - since


async def stopped(worker: Running) -> Finished:
    """SIGTERM, then the exit: the graceful stop a deployment performs."""
    if not worker.exited:
        worker.send_signal(signal.SIGTERM)
    return await worker.wait()


async def no_worker_left(db: SlotDatabase) -> bool:
    return await db.worker_sessions() == 0 and await db.worker_locks() == 0


class Record(Protocol):
    """Keep a fault's figures; `logs`: the commands whose failed cycles the operator sees."""

    def __call__(self, figures: FaultFigures, logs: Iterable[Running | Finished] = ()) -> None: ...


@dataclass
class FaultBooks:
    """The template of every fault test, kept in one place: the rows the worker owes (their
    ledger, taken before the fault), the rows at risk when the fault strikes (every owed row
    unless `strike` says when), and at the end the audit, recorded for docs/reliability.md
    (`close`) before the test asserts anything, so that a failing run still reports honestly."""

    ledger: Ledger
    record: Record
    rows_at_risk: int

    @classmethod
    async def open(cls, db: SlotDatabase, owed: Iterable[Slot], record: Record) -> Self:
        """The books on `db`'s rows as they are now; the worker owes an expiry to `owed`."""
        ledger = Ledger.of(await db.rows(), [slot.id for slot in owed])
        return cls(ledger, record, len(ledger.due))

    async def strike(self, db: SlotDatabase) -> None:
        """The fault strikes now: the owed rows not expired yet are at risk."""
        self.rows_at_risk = await at_risk(db, self.ledger)

    async def drain_time(
        self,
        db: SlotDatabase,
        workers: Sequence[Running],
        since: float,
        timeout_seconds: float = RECOVERY_TIMEOUT_SECONDS,
    ) -> float | None:
        """Seconds from `since` until every owed row is Expired (see `drain_time`)."""
        return await drain_time(db, self.ledger, workers, since, timeout_seconds)

    def audit(
        self,
        rows: Mapping[UUID, Row],
        logs: Sequence[Running | Finished] = (),
        reported: int | None = None,
    ) -> Audit:
        """`rows` (the table after the recovery) against the ledger and the expiries the
        workers reported: their `logs`' count, or `reported` for cycles run in-process."""
        expired = reported_expired(logs) if reported is None else reported
        return self.ledger.audit(rows, expired, self.rows_at_risk)

    def close(
        self,
        rows: Mapping[UUID, Row],
        logs: Sequence[Running | Finished],
        *,
        fault: str,
        injection: str,
        recovery: float | None,
        note: str | Callable[[Audit], str] = "",
        reported: int | None = None,
    ) -> Audit:
        """The audit, recorded with the fault's description and figures (`note` may be made
        from the audit), for the test to assert on."""
        audit = self.audit(rows, logs, reported)
        figures = FaultFigures(
            fault,
            injection,
            audit.rows_at_risk,
            len(audit.lost),
            len(audit.done_twice),
            recovery,
            note(audit) if callable(note) else note,
        )
        self.record(figures, logs)
        return audit
