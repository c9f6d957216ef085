"""What the worker replicas say of themselves, when told where they are (`--replicas`):
each one's /readyz, asked beside the database.

The history holds what a replica could write. One that cannot log in or write to the
database (a password changed under it, a grant revoked) records nothing there, not even
its failures, and one that is not running records nothing either: the history shows both
as silence only. /readyz says which, and why: whether it answers, whether it is ready,
whether only a person can cure what stops it, and the latest cycle the history could not
take (telemetry/readiness.py writes what is read here).
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from slot_expiration.domain.text import excerpt
from slot_expiration.options.listen_address import ListenAddress

# The replica's own probe gives the database 5 s (worker/observability.py): a little more.
TIMEOUT_SECONDS: Final = 6.0
# A /readyz answer is a few hundred bytes; more is not one.
MAX_ANSWER_BYTES: Final = 64 * 1024
# Every request goes straight to the replica: never through an HTTP proxy the environment
# names (http_proxy), which could not reach a pod's address, or would see the page's reads.
_OPENER: Final = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True, slots=True)
class Unrecorded:
    """A cycle the replica ran whose row the history could not take."""

    outcome: str
    ended_at: datetime  # on the database's clock, as its row would have been
    error: str


@dataclass(frozen=True, slots=True)
class ReplicaAnswer:
    """One replica's /readyz, or why there was none."""

    address: str  # host:port, as given
    answered: bool
    ready: bool
    detail: str  # its readiness's words, or why it did not answer
    needs_a_person: bool = False
    unrecorded: Unrecorded | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "answered": self.answered,
            "ready": self.ready,
            "detail": self.detail,
            "needs_a_person": self.needs_a_person,
            "unrecorded_cycle": None
            if self.unrecorded is None
            else {
                "outcome": self.unrecorded.outcome,
                "ended_at": self.unrecorded.ended_at.isoformat(),
                "error": self.unrecorded.error,
            },
        }


async def ask_replicas(addresses: Sequence[ListenAddress]) -> tuple[ReplicaAnswer, ...]:
    """Each replica's /readyz, all at once; none takes longer than TIMEOUT_SECONDS."""
    return tuple(await asyncio.gather(*(asyncio.to_thread(_ask, a) for a in addresses)))


def _ask(address: ListenAddress) -> ReplicaAnswer:
    shown = str(address)
    try:
        with _OPENER.open(f"http://{shown}/readyz", timeout=TIMEOUT_SECONDS) as response:
            status, body = response.status, response.read(MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as exc:  # 503: not ready, and its answer says why
        with exc:
            status, body = exc.code, exc.read(MAX_ANSWER_BYTES + 1)
    except (urllib.error.URLError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        return ReplicaAnswer(shown, False, False, excerpt(str(reason)))
    return read_answer(shown, status, body)


def read_answer(address: str, status: int, body: bytes) -> ReplicaAnswer:
    """A /readyz answer as the worker gives it (telemetry/readiness.py's `as_json`); any
    other answer says what it was."""
    answer = _worker_answer(status, body)
    if answer is None:
        return ReplicaAnswer(
            address, True, False, f"answers /readyz with HTTP {status}, not as a worker does"
        )
    return ReplicaAnswer(
        address,
        True,
        answer["ready"],
        excerpt(answer["detail"]),
        needs_a_person=answer.get("needs_a_person") is True,
        unrecorded=_unrecorded(answer.get("unrecorded_cycle")),
    )


def _worker_answer(status: int, body: bytes) -> dict[str, Any] | None:
    """The answer's JSON object when it is a worker's (its status, `ready`, `detail`)."""
    if status not in (200, 503) or len(body) > MAX_ANSWER_BYTES:
        return None
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    if not isinstance(answer.get("ready"), bool) or not isinstance(answer.get("detail"), str):
        return None
    return answer


def _unrecorded(told: Any) -> Unrecorded | None:
    if not isinstance(told, dict):
        return None
    outcome, ended_at, error = (told.get(key) for key in ("outcome", "ended_at", "error"))
    if not (isinstance(outcome, str) and isinstance(ended_at, str) and isinstance(error, str)):
        return None
    try:
        ended = datetime.fromisoformat(ended_at)
    except ValueError:
        return None
    if ended.tzinfo is None:
        return None
    return Unrecorded(excerpt(outcome, limit=40), ended, excerpt(error))
