"""What `status --check` and the page read of each replica named by `--replicas`: its /readyz,
as the worker's endpoint serves it, over real HTTP on the loopback."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from slot_expiration.domain.text import MAX_MESSAGE_CHARS
from slot_expiration.options import OptionsError, StatusOptions, load_settings
from slot_expiration.options.listen_address import ListenAddress
from slot_expiration.status.replicas import (
    MAX_ANSWER_BYTES,
    ReplicaAnswer,
    Unrecorded,
    ask_replicas,
    read_answer,
)
from slot_expiration.telemetry.endpoints import serving
from slot_expiration.telemetry.liveness import LivenessReport
from slot_expiration.telemetry.readiness import ReadinessReport
from slot_expiration.telemetry.readiness import Unrecorded as Lost

LIVE = LivenessReport(True, "ok", "ticking", 1.0, None)
ENDED = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
REFUSED = ReadinessReport(
    False,
    'database: password authentication failed for user "w"',
    None,
    "0007",
    needs_a_person=True,
    unrecorded_cycle=Lost(
        "5b6e", "misconfigured", ENDED, "password authentication failed (SQLSTATE 28P01)"
    ),
)


@asynccontextmanager
async def _replica(ready: ReadinessReport) -> AsyncIterator[ListenAddress]:
    """The worker's own endpoint, answering `ready` at /readyz."""

    async def readiness() -> ReadinessReport:
        return ready

    address = ListenAddress("127.0.0.1", 0)
    async with serving(address, CollectorRegistry(), lambda: LIVE, readiness) as url:
        yield ListenAddress("127.0.0.1", int(url.rpartition(":")[2]))


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_each_replica_is_asked_its_readyz_and_read_as_the_worker_serves_it() -> None:
    ready = ReadinessReport(True, "database answers, schema up to date", "0007", "0007")
    gone = ListenAddress("127.0.0.1", _closed_port())
    async with _replica(ready) as one, _replica(REFUSED) as other:
        answers = await ask_replicas([one, other, gone])

    assert answers[0] == ReplicaAnswer(str(one), True, True, ready.detail)
    assert answers[1] == ReplicaAnswer(
        str(other),
        True,
        False,
        REFUSED.detail,
        needs_a_person=True,
        unrecorded=Unrecorded(
            "misconfigured", ENDED, "password authentication failed (SQLSTATE 28P01)"
        ),
    )
    assert (answers[2].answered, answers[2].ready) == (False, False)
    assert answers[2].detail == "[Errno 111] Connection refused"


async def test_no_replica_named_asks_nothing() -> None:
    assert await ask_replicas([]) == ()


async def test_an_http_proxy_in_the_environment_is_never_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{_closed_port()}")
    ready = ReadinessReport(True, "database answers, schema up to date", "0007", "0007")
    async with _replica(ready) as one:
        (answer,) = await ask_replicas([one])

    assert answer.ready


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (200, b"<html>hello</html>"),
        (200, b'{"ready": "yes", "detail": "fine"}'),
        (404, b'{"ready": true, "detail": "fine"}'),
        (200, b"[1, 2]"),
        (200, b'{"ready": true, "detail": "' + b"x" * MAX_ANSWER_BYTES + b'"}'),
    ],
    ids=["html", "ready-not-a-boolean", "not-found", "not-an-object", "too-long"],
)
def test_an_answer_that_is_not_a_workers_says_so_and_is_not_ready(status: int, body: bytes) -> None:
    answer = read_answer("10.0.0.5:9464", status, body)

    assert (answer.answered, answer.ready) == (True, False)
    assert answer.detail == f"answers /readyz with HTTP {status}, not as a worker does"


def test_what_a_replica_says_is_read_in_500_characters_at_most() -> None:
    body = json.dumps(
        {
            "ready": False,
            "detail": "d" * 10_000,
            "needs_a_person": True,
            "unrecorded_cycle": {
                "outcome": "failed",
                "ended_at": ENDED.isoformat(),
                "error": "e" * 10_000,
            },
        }
    ).encode()

    answer = read_answer("10.0.0.5:9464", 503, body)

    assert len(answer.detail) == MAX_MESSAGE_CHARS
    assert answer.unrecorded is not None
    assert len(answer.unrecorded.error) == MAX_MESSAGE_CHARS


def test_replicas_are_given_as_host_port_each_and_a_wrong_one_named_in_one_line() -> None:
    given = load_settings(StatusOptions, replicas="10.0.0.5:9464, [::1]:9464,worker-b:9464")

    assert [str(a) for a in given.replica_addresses] == [
        "10.0.0.5:9464",
        "[::1]:9464",
        "worker-b:9464",
    ]
    assert load_settings(StatusOptions).replica_addresses == ()
    for wrong in ("http://10.0.0.5:9464", "10.0.0.5", "10.0.0.5:0", "10.0.0.5:9464,x y:1"):
        with pytest.raises(OptionsError) as refused:
            load_settings(StatusOptions, replicas=wrong)
        assert str(refused.value).startswith("--replicas / SLOT_EXPIRATION_REPLICAS: ")
        assert "\n" not in str(refused.value)
