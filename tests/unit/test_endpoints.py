"""The HTTP endpoint: /metrics in Prometheus's format, /healthz and /readyz as 200 or 503."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest
from prometheus_client import CONTENT_TYPE_LATEST

from slot_expiration.options.listen_address import ListenAddress
from slot_expiration.telemetry.endpoints import EndpointError, serving
from slot_expiration.telemetry.liveness import LivenessReport
from slot_expiration.telemetry.readiness import ReadinessReport

LIVE = LivenessReport(True, "ok", "ticking", 1.0, None)
DEAD = LivenessReport(False, "not_ticking", "no tick for 400.0 s", 400.0, None)
READY = ReadinessReport(True, "database answers, schema up to date", "0002", "0002")
NOT_READY = ReadinessReport(False, "the schema is missing", None, "0002")
ANY_PORT = ListenAddress("127.0.0.1", 0)


@asynccontextmanager
async def _served(
    live: LivenessReport = LIVE, ready: ReadinessReport = READY, address: ListenAddress = ANY_PORT
) -> AsyncIterator[str]:
    async def readiness() -> ReadinessReport:
        return ready

    async with serving(address, lambda: b"up 1\n", lambda: live, readiness) as url:
        yield url


async def _get(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, response.headers["Content-Type"], await response.text()


async def test_metrics_are_served_in_the_prometheus_text_format() -> None:
    async with _served() as url:
        status, content_type, body = await _get(f"{url}/metrics")

    assert status == 200
    assert content_type == CONTENT_TYPE_LATEST  # the format generate_latest writes
    assert body == "up 1\n"


@pytest.mark.parametrize(("report", "code"), [(LIVE, 200), (DEAD, 503)])
async def test_healthz_answers_200_when_live_and_503_when_not(
    report: LivenessReport, code: int
) -> None:
    async with _served(live=report) as url:
        status, content_type, body = await _get(f"{url}/healthz")

    assert status == code
    assert content_type.startswith("application/json")
    assert report.status in body


@pytest.mark.parametrize(("report", "code"), [(READY, 200), (NOT_READY, 503)])
async def test_readyz_answers_200_when_ready_and_503_when_not(
    report: ReadinessReport, code: int
) -> None:
    async with _served(ready=report) as url:
        status, _, body = await _get(f"{url}/readyz")

    assert status == code
    assert report.detail in body


async def test_port_zero_is_replaced_by_the_port_the_system_chose() -> None:
    async with _served() as url:
        port = int(url.rpartition(":")[2])

    assert url.startswith("http://127.0.0.1:")
    assert port > 0


async def test_an_unknown_path_is_404() -> None:
    async with _served() as url:
        status, _, _ = await _get(f"{url}/nothing")

    assert status == 404


async def test_a_port_already_in_use_is_one_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        with pytest.raises(EndpointError) as caught:
            async with _served(address=ListenAddress("127.0.0.1", port)):
                pass

    assert str(caught.value) == (
        f"cannot serve metrics on 127.0.0.1:{port} (--metrics-addr): the port is already in use"
    )


async def test_the_port_is_released_when_the_block_ends() -> None:
    async with _served() as url:
        port = int(url.rpartition(":")[2])

    with socket.socket() as again:
        again.bind(("127.0.0.1", port))
