"""The deployment's pause, slot_expiration_pauses: every read and write of it.

Each cycle reads the pause in force in its first transaction (its store's session): a
row every replica reads at each tick, so `pause` stops them all within an interval, with
no restart and no leader. `slot-expiration pause` and `resume` write it on an operator's
session of their own, as a role that may (the worker's may only read it). Every pause
is kept once it ended (who resumed it, when). Statements: pause.sql.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Self

from slot_expiration.db.errors import (
    INSUFFICIENT_PRIVILEGE,
    MisconfiguredStoreError,
    StoreError,
)
from slot_expiration.db.session import (
    ApplicationName,
    Session,
    SessionSettings,
    TransactionLimits,
)
from slot_expiration.schema.location import verify_slot_table

# A pause given no end (`pause` without --for) is judged forgotten after this long: the
# verdict turns CRITICAL, the worker's calendar_slot_expiration_pause_limit_seconds says it
# and the alert SlotExpirationPausedTooLong fires. Written once, here.
LIMIT_WITHOUT_END: Final = timedelta(hours=4)
# The longest --for a pause takes: a pause is for an incident or a maintenance window.
LONGEST: Final = timedelta(days=7)
# A reason is one line a person writes: the page, the verdict and the logs show it whole.
REASON_MAX_CHARS: Final = 500
PAUSES: Final = "slot_expiration_pauses"


def moment_text(moment: datetime) -> str:
    """`2026-12-07 14:30:00 UTC`: how a pause's moments read everywhere."""
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def span_text(lasting: timedelta) -> str:
    """A span as `pause --for` takes it: `7d`, `4h`, `1h30m`, `90s` as `1m30s`."""
    seconds = int(lasting.total_seconds())
    days, seconds = divmod(seconds, 86_400)
    hours, seconds = divmod(seconds, 3_600)
    minutes, seconds = divmod(seconds, 60)
    parts = zip((days, hours, minutes, seconds), "dhms", strict=True)
    return "".join(f"{count}{unit}" for count, unit in parts if count) or "0s"


@dataclass(frozen=True, slots=True)
class Pause:
    """A pause: since when (the database's clock), by which role, until when (None: no end
    given) and why. It holds until `resume`: its end is what the operator promised, which
    the verdict and the alert hold them to, never a moment the replicas resume by
    themselves (an incident that runs long must not see them start again unasked)."""

    paused_at: datetime
    paused_by: str
    paused_until: datetime | None
    reason: str

    @property
    def limit(self) -> timedelta:
        """How long it may last: until its end, else LIMIT_WITHOUT_END."""
        if self.paused_until is None:
            return LIMIT_WITHOUT_END
        return self.paused_until - self.paused_at

    def age(self, at: datetime) -> timedelta:
        return max(at - self.paused_at, timedelta(0))

    def outlived(self, at: datetime) -> bool:
        """Past its end, or past the limit when no end was given."""
        return self.age(at) > self.limit

    def text(self, detail: str = "") -> str:
        """`paused by ops until 2026-12-07 14:30:00 UTC: a reason`, or, with no end given,
        `paused by ops since 2026-12-07 12:00:00 UTC, no end given: a reason`; a `detail`
        goes before the reason (`..., 1h 5m left: a reason`)."""
        if self.paused_until is None:
            when = f"since {moment_text(self.paused_at)}, no end given"
        else:
            when = f"until {moment_text(self.paused_until)}"
        more = f", {detail}" if detail else ""
        return f"paused by {self.paused_by} {when}{more}: {self.reason}"

    def as_json(self) -> dict[str, Any]:
        return {
            "paused_at": self.paused_at.isoformat(),
            "paused_by": self.paused_by,
            "paused_until": None if self.paused_until is None else self.paused_until.isoformat(),
            "reason": self.reason,
            "limit_seconds": self.limit.total_seconds(),
        }


@dataclass(frozen=True, slots=True)
class EndedPause:
    """A pause that ended: when, and by which role."""

    pause: Pause
    resumed_at: datetime
    resumed_by: str

    @classmethod
    def from_columns(cls, *, resumed_at: datetime, resumed_by: str, **pause: Any) -> Self:
        return cls(Pause(**pause), resumed_at, resumed_by)


class AlreadyPausedError(StoreError):
    """`pause` while a pause is in force (without --replace): nothing changed."""

    def __init__(self, pause: Pause) -> None:
        super().__init__(
            f"already {pause.text()}; nothing changed: `slot-expiration pause --replace` "
            "replaces it, `slot-expiration resume` ends it"
        )
        self.pause = pause


class PauseStore:
    """slot_expiration_pauses, on the session (and in the transaction) it is given."""

    def __init__(self, session: Session) -> None:
        self._session = session

    @classmethod
    @asynccontextmanager
    async def connect(cls, database_url: str, limits: TransactionLimits) -> AsyncIterator[Self]:
        """An operator's session of its own, in one transaction: all of a command or
        nothing, on the calendar's own table's schema (never another deployment's)."""
        settings = SessionSettings(ApplicationName.ADMIN, limits=limits)
        async with Session.open(database_url, settings) as session, session.transaction():
            found = await verify_slot_table(session)
            try:
                yield cls(session)
            except MisconfiguredStoreError as exc:
                raise _not_the_operator(exc, found.role) from exc

    async def current(self) -> Pause | None:
        """The pause in force, if any."""
        found = await self._session.records("current_pause", Pause)
        return found[0] if found else None

    async def start(self, lasting: timedelta | None, reason: str) -> Pause:
        """Pause from now for `lasting` (None: no end given). Raises AlreadyPausedError
        while one is in force (`pause --replace` ends it first, in the same transaction:
        no tick sees none in between)."""
        params = {"for": lasting, "reason": reason}
        started = await self._session.records("start_pause", Pause, params)
        if started:
            return started[0]
        current = await self.current()
        if current is None:  # ended meanwhile by another resume: said as it is
            raise StoreError("a pause was in force and ended meanwhile; run pause again")
        raise AlreadyPausedError(current)

    async def end(self) -> EndedPause | None:
        """End the pause in force now; None when none is."""
        ended = await self._session.records("end_pause", EndedPause.from_columns)
        return ended[0] if ended else None

    async def latest_ended(self) -> EndedPause | None:
        found = await self._session.records("latest_ended_pause", EndedPause.from_columns)
        return found[0] if found else None


def _not_the_operator(exc: MisconfiguredStoreError, role: str) -> StoreError:
    """A role that may read the pause but not write it (the worker's): who may."""
    if exc.sqlstate != INSUFFICIENT_PRIVILEGE:
        return exc
    return MisconfiguredStoreError(
        f"role {role} may not pause or resume the worker ({exc}): run it as the role "
        "`migrate` runs as (the owner of the worker's tables); the worker's own role may "
        "only read the pause",
        exc.sqlstate,
    )
