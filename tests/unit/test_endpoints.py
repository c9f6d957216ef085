"""The HTTP endpoint: /metrics in Prometheus's format, /healthz and /readyz as 200 or 503."""

from __future__ import annotations

import gzip
import logging
import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Gauge, make_wsgi_app
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from slot_expiration.options.listen_address import ListenAddress
from slot_expiration.telemetry.endpoints import EndpointError, serving
from slot_expiration.telemetry.liveness import LivenessReport
from slot_expiration.telemetry.metrics import PREFIX, Metrics
from slot_expiration.telemetry.readiness import ReadinessReport
from tests.support.wire import WireClient, status_of

LIVE = LivenessReport(True, "ok", "ticking", 1.0, None)
DEAD = LivenessReport(False, "not_ticking", "no tick for 400.0 s", 400.0, None)
READY = ReadinessReport(True, "database answers, schema up to date", "0002", "0002")
NOT_READY = ReadinessReport(False, "the schema is missing", None, "0002")
ANY_PORT = ListenAddress("127.0.0.1", 0)


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Gauge("up", "Whether the worker is up.", registry=registry).set(1)
    return registry


@asynccontextmanager
async def _served(
    live: LivenessReport = LIVE,
    ready: ReadinessReport = READY,
    address: ListenAddress = ANY_PORT,
    registry: CollectorRegistry | None = None,
) -> AsyncIterator[str]:
    async def readiness() -> ReadinessReport:
        return ready

    async with serving(address, registry or _registry(), lambda: live, readiness) as url:
        yield url


def _port(url: str) -> int:
    return int(url.rpartition(":")[2])


async def _get(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, response.headers["Content-Type"], await response.text()


async def test_metrics_are_served_in_the_prometheus_text_format() -> None:
    async with _served() as url:
        status, content_type, body = await _get(f"{url}/metrics")

    assert status == 200
    assert content_type == CONTENT_TYPE_PLAIN_0_0_4  # what prometheus_client sends by default
    assert body == "# HELP up Whether the worker is up.\n# TYPE up gauge\nup 1.0\n"


async def test_openmetrics_is_served_when_the_scraper_accepts_it() -> None:
    accept = "application/openmetrics-text; version=1.0.0"
    async with _served() as url, await WireClient.connect(_port(url)) as client:
        answer = await client.get("/metrics", accept=accept)

    assert answer.status == 200
    assert answer.headers["content-type"].startswith(f"{accept}; charset=utf-8")
    text = answer.body.decode()
    assert text.endswith("# EOF\n")
    # The OpenMetrics parser accepts it (the parser is unannotated upstream).
    (family,) = text_string_to_metric_families(text)  # type: ignore[no-untyped-call]
    assert family.samples[0].value == 1.0


async def test_metrics_are_gzipped_when_the_scraper_accepts_gzip() -> None:
    async with _served() as url, await WireClient.connect(_port(url)) as client:
        zipped = await client.get("/metrics", accept_encoding="gzip")
        plain = await client.get("/metrics")

    assert zipped.headers["content-encoding"] == "gzip"
    assert gzip.decompress(zipped.body) == plain.body
    assert "content-encoding" not in plain.headers


@pytest.mark.parametrize(
    ("accept", "accept_encoding"),
    [
        ("", ""),
        ("application/openmetrics-text; version=1.0.0", ""),
        ("text/plain;version=0.0.4;q=0.5,*/*;q=0.1", "gzip"),
        ("application/openmetrics-text; version=1.0.0,text/plain;q=0.5", "gzip, deflate"),
        ("", "identity"),
    ],
)
async def test_metrics_negotiate_format_and_compression_as_prometheus_clients_own_handler(
    accept: str, accept_encoding: str
) -> None:
    registry = _registry()
    async with _served(registry=registry) as url, await WireClient.connect(_port(url)) as client:
        ours = await client.get("/metrics", accept=accept, accept_encoding=accept_encoding)
    status, headers, body = _wsgi_get(make_wsgi_app(registry), accept, accept_encoding)

    assert ours.status == int(status.split()[0])
    assert ours.headers["content-type"] == headers["content-type"]
    assert ours.headers.get("content-encoding") == headers.get("content-encoding")
    assert _plain(ours.body, ours.headers) == _plain(body, headers)


def _wsgi_get(app: Any, accept: str, accept_encoding: str) -> tuple[str, dict[str, str], bytes]:
    """One GET /metrics through a WSGI app, as a server would call it."""
    answer: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        answer["status"] = status
        answer["headers"] = {name.lower(): value for name, value in headers}

    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": ""}
    environ |= {"HTTP_ACCEPT": accept, "HTTP_ACCEPT_ENCODING": accept_encoding}
    body = b"".join(app(environ, start_response))
    return answer["status"], answer["headers"], body


def _plain(body: bytes, headers: Mapping[str, str]) -> bytes:
    return gzip.decompress(body) if headers.get("content-encoding") == "gzip" else body


async def test_a_malformed_request_is_counted_in_the_metrics_and_logged_at_most_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorded = Metrics()
    caplog.set_level(logging.DEBUG)

    async def readiness() -> ReadinessReport:
        return READY

    with capture_logs() as logs:
        async with serving(
            ANY_PORT,
            recorded.registry,
            lambda: LIVE,
            readiness,
            on_bad_request=recorded.http_bad_requests.inc,
        ) as url:
            async with await WireClient.connect(_port(url)) as client:
                await client.send(b"\x16\x03\x01 a TLS hello, say\r\n\r\n")
                answer = await client.raw_answer()
            _, _, body = await _get(f"{url}/metrics")

    assert status_of(answer) == 400, answer
    assert f"{PREFIX}_http_bad_requests_total 1.0" in body
    assert {log["log_level"] for log in logs} <= {"debug"}, logs
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_a_post_is_405() -> None:
    async with (
        _served() as url,
        aiohttp.ClientSession() as session,
        session.post(f"{url}/metrics") as response,
    ):
        status, allow = response.status, response.headers["Allow"]

    assert (status, allow) == (405, "GET, HEAD")


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
