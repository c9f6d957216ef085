"""Readiness: the database answers, its schema is at the newest migration (or ahead of
it: a newer release migrated it), and the last cycle did not fail on what only a
person can fix (a grant, a table, the clock)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from slot_expiration.cycle import CycleEnded, sqlstate_of
from slot_expiration.domain import CycleOutcome
from slot_expiration.loop import Event
from slot_expiration.store.errors import SchemaMissingError, StoreError
from slot_expiration.store.schema_version import (
    SchemaPosition,
    ahead_of_release,
    position_of,
    unknown_revision,
)

SchemaRevision = Callable[[], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class ReadinessReport:
    ready: bool
    detail: str
    schema_revision: str | None
    latest_revision: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            "detail": self.detail,
            "schema_revision": self.schema_revision,
            "latest_revision": self.latest_revision,
        }


class Readiness:
    """Asks the database for its schema revision on each probe, one probe at a time:
    callers arriving while one runs share its answer, so a burst of /readyz requests
    costs one database session and waits at most one timeout. As a sink it remembers
    whether the last cycle failed on what only a person can fix.

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

    def __call__(self, event: Event) -> None:
        if not isinstance(event, CycleEnded):
            return
        outcome = event.result.outcome
        if outcome is CycleOutcome.SUCCESS:
            self._needs_a_person = None
        elif outcome.needs_a_person and event.error is not None:
            sqlstate = sqlstate_of(event.error)
            code = f" (SQLSTATE {sqlstate})" if sqlstate else ""
            self._needs_a_person = f"the last cycle failed, {outcome.value}{code}: {event.error}"
        # A transient failure leaves what was known of the configuration as it was.

    async def report(self) -> ReadinessReport:
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(self._check())
        # A caller cancelled (its client went away) leaves the probe to the others.
        probed = await asyncio.shield(self._probe)
        if self._needs_a_person is None:
            return probed
        return self._not_ready(self._needs_a_person, probed.schema_revision)

    async def _check(self) -> ReadinessReport:
        try:
            async with asyncio.timeout(self._timeout):
                current = await self._schema_revision()
        except SchemaMissingError:
            return self._not_ready("the schema is missing: run `slot-expiration migrate`", None)
        except StoreError as exc:
            return self._not_ready(f"database: {exc}", None)
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

    def _not_ready(self, detail: str, current: str | None) -> ReadinessReport:
        return ReadinessReport(False, detail, current, self._latest)
