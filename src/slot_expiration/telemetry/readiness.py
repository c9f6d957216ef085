"""Readiness: the database answers, its schema is at the newest migration (or ahead of
it: a newer release migrated it), and the last cycle did not fail on what only a
person can fix (a grant, a table, the clock). A paused replica is ready: it does what it
was told, and says that it is paused (by whom, until when, why).

Beside the answer, what the history cannot hold: a replica that cannot log in or write
to the database records nothing there, not even its failures, so `status --check` and
the page see only its silence. /readyz says whether a person must act, and the latest
cycle whose row the history could not take (its outcome, and why the write failed):
`status --check --replicas` and the page read it there."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from slot_expiration.db.errors import ErrorFamily, SchemaMissingError, StoreError
from slot_expiration.domain import CycleOutcome
from slot_expiration.domain.text import excerpt
from slot_expiration.expiry import CycleEnded, PauseChecked, sqlstate_of
from slot_expiration.history.store import CycleRecord
from slot_expiration.loop import Event
from slot_expiration.pause import Pause
from slot_expiration.schema.version import (
    SchemaPosition,
    ahead_of_release,
    position_of,
    unknown_revision,
)

SchemaRevision = Callable[[], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class Unrecorded:
    """The latest cycle whose row the history could not take, and why."""

    run_id: str
    outcome: str
    ended_at: datetime  # on the database's clock, as its row would have been
    error: str

    def as_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "outcome": self.outcome,
            "ended_at": self.ended_at.isoformat(),
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class ReadinessReport:
    ready: bool
    detail: str
    schema_revision: str | None
    latest_revision: str | None
    # Only a person can cure what makes it unready: a login, a grant, a table, the clock.
    needs_a_person: bool = False
    unrecorded_cycle: Unrecorded | None = None
    # The pause the last cycle found in force: the replica stays ready (it obeys, and a
    # rolling deploy during a maintenance window must not stall on it) and says so.
    pause: Pause | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            "detail": self.detail,
            "schema_revision": self.schema_revision,
            "latest_revision": self.latest_revision,
            "needs_a_person": self.needs_a_person,
            "unrecorded_cycle": (
                None if self.unrecorded_cycle is None else self.unrecorded_cycle.as_json()
            ),
            "pause": None if self.pause is None else self.pause.as_json(),
        }


class Readiness:
    """Asks the database for its schema revision on each probe, one probe at a time:
    callers arriving while one runs share its answer, so a burst of /readyz requests
    costs one database session and waits at most one timeout. As a sink it remembers
    whether the last cycle failed on what only a person can fix; the history's writer
    tells it of each row written or lost (`history_written`).

    Its answer is served to whoever can reach the endpoint: the store's messages
    never quote a password (libpq's do not, and a URL whose password would spill
    into its host is refused before any connection), so none is masked here.
    """

    def __init__(
        self,
        schema_revision: SchemaRevision,
        latest_revision: str | None,
        timeout_seconds: float = 5.0,
    ) -> None:
        self._schema_revision = schema_revision
        self._latest = latest_revision
        self._timeout = timeout_seconds
        self._probe: asyncio.Task[ReadinessReport] | None = None
        self._needs_a_person: str | None = None
        self._unrecorded: Unrecorded | None = None
        self._pause: Pause | None = None

    def __call__(self, event: Event) -> None:
        if isinstance(event, PauseChecked):
            self._pause = event.pause
        if not isinstance(event, CycleEnded):
            return
        outcome = event.result.outcome
        if outcome in (CycleOutcome.SUCCESS, CycleOutcome.PAUSED):  # its checks passed
            self._needs_a_person = None
        elif outcome.needs_a_person and event.error is not None:
            sqlstate = sqlstate_of(event.error)
            code = f" (SQLSTATE {sqlstate})" if sqlstate else ""
            self._needs_a_person = excerpt(
                f"the last cycle failed, {outcome.value}{code}: {event.error}"
            )
        # A transient failure leaves what was known of the configuration as it was.

    def history_written(self, record: CycleRecord, error: str | None) -> None:
        """The history took the cycle's row (`error` None), or could not: the latest such
        cycle is served until a later row is written."""
        if error is None:
            # Writes run side by side: an older row written late clears nothing newer.
            if self._unrecorded is None or record.ended_at >= self._unrecorded.ended_at:
                self._unrecorded = None
            return
        self._unrecorded = Unrecorded(
            str(record.run_id), record.outcome.value, record.ended_at, excerpt(error)
        )

    async def report(self) -> ReadinessReport:
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(self._check())
        # A caller cancelled (its client went away) leaves the probe to the others.
        probed = await asyncio.shield(self._probe)
        if self._needs_a_person is not None:
            probed = self._not_ready(self._needs_a_person, probed.schema_revision, person=True)
        if self._pause is not None and probed.ready:
            probed = replace(probed, detail=f"{probed.detail}; {self._pause.text()}")
        return replace(probed, unrecorded_cycle=self._unrecorded, pause=self._pause)

    async def _check(self) -> ReadinessReport:
        try:
            async with asyncio.timeout(self._timeout):
                current = await self._schema_revision()
        except SchemaMissingError:
            return self._not_ready("the schema is missing: run `slot-expiration migrate`", None)
        except StoreError as exc:
            # A refused login or a missing privilege: waiting will not cure it.
            person = exc.family is ErrorFamily.MISCONFIGURED
            return self._not_ready(excerpt(f"database: {exc}"), None, person=person)
        except TimeoutError:
            return self._not_ready(f"the database did not answer within {self._timeout:g} s", None)
        return self._against_latest(current)

    def _against_latest(self, current: str | None) -> ReadinessReport:
        """Ready at the newest revision, and ahead of it: migrations only add, so a
        release runs on the schema of a newer one (rolling deploys, rollbacks)."""
        position = position_of(current, self._latest or "")
        if position is SchemaPosition.CURRENT:
            return self._ready("database answers, schema up to date", current)
        if position is SchemaPosition.AHEAD and current is not None:
            detail = f"{ahead_of_release(current, str(self._latest))}: migrations only add"
            return self._ready(f"database answers, {detail}, so this release runs on it", current)
        if position is SchemaPosition.UNKNOWN and current is not None:
            return self._not_ready(unknown_revision(current), current)
        return self._not_ready(
            f"the schema is at {current or 'no revision'}, the newest is {self._latest}: "
            "run `slot-expiration migrate`",
            current,
        )

    def _ready(self, detail: str, current: str | None) -> ReadinessReport:
        return ReadinessReport(True, detail, current, self._latest)

    def _not_ready(
        self, detail: str, current: str | None, *, person: bool = False
    ) -> ReadinessReport:
        return ReadinessReport(False, detail, current, self._latest, needs_a_person=person)
