"""`slot-expiration run` serves /metrics, /healthz and /readyz on --metrics-addr."""

from __future__ import annotations

import asyncio
import signal
import socket
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import aiohttp
import pytest

from slot_expiration.schema.migrate import head_revision
from tests.e2e.command import (
    PASSWORD,
    Running,
    eventually,
    open_descriptors,
    open_files_limit,
    run_command,
    started,
)
from tests.e2e.endpoint import endpoint_url, get, get_json, sample
from tests.support.database import SlotDatabase
from tests.support.promtool import promtool
from tests.support.slots import make_slot
from tests.support.wire import status_of

pytestmark = pytest.mark.e2e

P = "calendar_slot_expiration"
FAST = ("--interval-seconds", "1", "--batch-size", "2")
# The abuse test: a worker allowed few files, and far more idle connections than that.
FD_LIMIT = 256
IDLE_CONNECTIONS = 2_000
CONNECT_WAVE = 32
WAVE_TIMEOUT_SECONDS = 10.0
GARBAGE_REQUESTS = 5


async def test_run_serves_its_metrics_health_and_readiness_while_it_polls(
    db: SlotDatabase, secret_url: str
) -> None:
    now = datetime.now(UTC)
    due = await db.insert(make_slot(timedelta(minutes=-m), as_of=now) for m in range(1, 6))
    await db.insert([make_slot(timedelta(days=1), as_of=now)])

    async with started("run", *FAST, "--database-url", secret_url) as worker:
        url = await endpoint_url(worker)
        scraped: list[str] = []

        async def all_expired_counted() -> bool:
            status, text = await get(f"{url}/metrics")
            scraped.append(text)
            # Items count as each batch commits, the backlog once its cycle completes:
            # a scrape between the two sees the last batch counted and the old backlog.
            counted = sample(text, f"{P}_items_total") == len(due)
            return status == 200 and counted and sample(text, f"{P}_backlog") == 0

        await worker.until(all_expired_counted, "items_total counting the 5 expired slots")
        health = await get_json(f"{url}/healthz")
        ready = await get_json(f"{url}/readyz")
        worker.send_signal(signal.SIGTERM)
        done = await worker.wait()

    assert done.returncode == 0, done.describe()
    assert health == (200, {**health[1], "live": True, "status": "ok"})
    assert ready == (200, {**ready[1], "ready": True, "schema_revision": head_revision()})
    metrics = scraped[-1]
    assert sample(metrics, f"{P}_backlog") == 0
    assert sample(metrics, f"{P}_cycles_total", outcome="success")
    assert sample(metrics, f"{P}_last_success_timestamp_seconds") == pytest.approx(
        datetime.now(UTC).timestamp(), abs=60
    )
    assert sample(metrics, f"{P}_cycle_duration_seconds_count")
    checked = promtool("check", "metrics", stdin=metrics.encode())
    assert checked.returncode == 0, checked.output
    assert checked.output.strip() == "", checked.output
    for secret in (PASSWORD, *(str(s.id) for s in due), *(str(s.tenant_id) for s in due)):
        assert secret not in metrics
    with pytest.raises(aiohttp.ClientConnectionError):
        await get(f"{url}/metrics")  # the endpoint stopped with the worker


async def test_readyz_turns_503_when_the_schema_falls_behind_and_healthz_stays_200(
    db: SlotDatabase, secret_url: str
) -> None:
    async with started("run", *FAST, "--database-url", secret_url) as worker:
        url = await endpoint_url(worker)
        assert (await get_json(f"{url}/readyz"))[0] == 200
        await db.execute("UPDATE slot_expiration_alembic_version SET version_num = '0001'")

        status, body = await get_json(f"{url}/readyz")
        health, _ = await get_json(f"{url}/healthz")

    assert status == 503
    assert body["ready"] is False
    assert body["schema_revision"] == "0001"
    assert "slot-expiration migrate" in body["detail"]
    assert PASSWORD not in str(body)
    assert health == 200


@pytest.mark.parametrize("how", ["flag", "environment"])
async def test_an_empty_metrics_addr_turns_the_endpoint_off(
    db: SlotDatabase, secret_url: str, how: str
) -> None:
    now = datetime.now(UTC)
    await db.insert([make_slot(timedelta(minutes=-1), as_of=now)])
    args = ("--metrics-addr", "") if how == "flag" else ()
    env = {"SLOT_EXPIRATION_METRICS_ADDR": ""}  # the tests' own default is a free port

    async with started("run", *FAST, *args, "--database-url", secret_url, env=env) as worker:
        await worker.until(lambda: worker.logged("cycle.completed"), "a cycle completed")
        worker.send_signal(signal.SIGTERM)
        done = await worker.wait()

    assert done.returncode == 0, done.describe()
    assert "endpoint.serving" not in done.stderr


async def test_a_port_already_in_use_is_one_error_line_exit_1_and_nothing_done(
    db: SlotDatabase, secret_url: str
) -> None:
    await db.insert([make_slot(timedelta(minutes=-1), as_of=datetime.now(UTC))])
    before = await db.rows()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        done = await run_command(
            "run", "--metrics-addr", f"127.0.0.1:{port}", "--database-url", secret_url
        )

    assert done.returncode == 1, done.describe()
    assert done.stdout == ""
    assert done.stderr == (
        f"slot-expiration: error: cannot serve metrics on 127.0.0.1:{port} (--metrics-addr): "
        "the port is already in use\n"
    )
    assert await db.rows() == before

    async def no_worker_session() -> bool:
        return await db.worker_sessions() == 0

    await eventually(no_worker_session, "no worker session")


@pytest.mark.parametrize("address", ["9464", "127.0.0.1:99999", "::1:9464"])
async def test_a_wrong_metrics_addr_is_a_usage_error_naming_the_option(
    secret_url: str, address: str
) -> None:
    done = await run_command("run", "--metrics-addr", address, "--database-url", secret_url)

    assert done.returncode == 2, done.describe()
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        "slot-expiration: error: --metrics-addr / SLOT_EXPIRATION_METRICS_ADDR: "
    ), line
    assert PASSWORD not in done.stderr


async def test_the_default_address_is_loopback_port_9464_as_help_shows(secret_url: str) -> None:
    done = await run_command("run", "--help")

    assert "[default: 127.0.0.1:9464]" in " ".join(done.stdout.split())
    assert "SLOT_EXPIRATION_METRICS_ADDR" in done.stdout


def _cycles_completed(worker: Running) -> int:
    return sum('"event": "cycle.completed"' in line for line in worker.stderr_lines)


async def _open_idle(port: int, count: int, worker: Running) -> tuple[list[socket.socket], int]:
    """`count` connections to the worker's port that never send a byte, opened in waves;
    returns them and the most descriptors the worker held meanwhile."""
    loop = asyncio.get_running_loop()
    held: list[socket.socket] = []
    peak = 0
    for _ in range(0, count, CONNECT_WAVE):
        wave = [socket.socket() for _ in range(CONNECT_WAVE)]
        for sock in wave:
            sock.setblocking(False)
        held += wave
        try:
            async with asyncio.timeout(WAVE_TIMEOUT_SECONDS):
                await asyncio.gather(*(loop.sock_connect(s, ("127.0.0.1", port)) for s in wave))
        except TimeoutError:
            for sock in held:
                sock.close()
            raise AssertionError(
                f"the worker stopped accepting after {len(held) - len(wave)} connections "
                f"(holding {open_descriptors(worker.pid)} fds): {worker.describe()}"
            ) from None
        peak = max(peak, open_descriptors(worker.pid))
    return held, peak


async def _send_garbage(port: int) -> None:
    """A malformed request, read to the server's close."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"\x16\x03\x01 not http\r\n\r\n")
    async with asyncio.timeout(10):
        assert status_of(await reader.read()) == 400
    writer.close()


async def test_more_idle_connections_than_its_fd_limit_leave_cycles_completing_and_healthz_200(
    secret_url: str,
) -> None:
    limit = (FD_LIMIT, FD_LIMIT)
    async with started("run", *FAST, "--database-url", secret_url, open_files=limit) as worker:
        url = await endpoint_url(worker)
        port = urlsplit(url).port
        assert port is not None
        held, peak = await _open_idle(port, IDLE_CONNECTIONS, worker)
        try:
            before = _cycles_completed(worker)
            asked = time.monotonic()
            health = await get_json(f"{url}/healthz")
            health_seconds = time.monotonic() - asked
            await worker.until(lambda: _cycles_completed(worker) >= before + 3, "3 more cycles")
            for _ in range(GARBAGE_REQUESTS):
                await _send_garbage(port)
            status, metrics = await get(f"{url}/metrics")
            peak = max(peak, open_descriptors(worker.pid))
            seen_limit = open_files_limit(worker.pid)
        finally:
            for sock in held:
                sock.close()
        worker.send_signal(signal.SIGTERM)
        done = await worker.wait()

    print(  # the numbers for the record (pytest -s)
        f"{IDLE_CONNECTIONS} idle connections, fd limit {FD_LIMIT}, peak {peak} fds held, "
        f"{_cycles_completed(worker) - before} cycles completed meanwhile, "
        f"/healthz in {health_seconds * 1000:.1f} ms"
    )
    assert done.returncode == 0, done.describe()
    assert seen_limit == limit
    assert peak < FD_LIMIT
    assert health == (200, {**health[1], "live": True, "status": "ok"})
    assert status == 200
    assert sample(metrics, f"{P}_http_bad_requests_total") == GARBAGE_REQUESTS
    assert sample(metrics, f"{P}_cycles_total", outcome="failed") == 0
    levels = {str(event.get("level")) for event in done.log_events()}
    assert levels <= {"info"}, done.describe()  # no error (nor asyncio's accept() one)
