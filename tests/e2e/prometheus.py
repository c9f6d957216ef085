"""A real Prometheus server (Debian's `prometheus`) on loopback, as a child of the test.

It scrapes the given targets every second and evaluates the given rule files
every second; the test reads it back through its HTTP API. Whatever happens,
the server is stopped and its data folder removed with the test's tmp_path.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import aiohttp

from tests.e2e.command import eventually

STOP_TIMEOUT_SECONDS = 10.0
READY_TIMEOUT_SECONDS = 30.0
HTTP_TIMEOUT = aiohttp.ClientTimeout(total=10)


class Prometheus:
    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.log = log

    async def api(self, path: str, **params: str) -> Any:
        """The `data` of a successful API answer (an error answer fails the test)."""
        async with (
            aiohttp.ClientSession(timeout=HTTP_TIMEOUT) as session,
            session.get(f"{self.url}/api/v1/{path}", params=params) as reply,
        ):
            body = await reply.json()
        assert body["status"] == "success", body
        return body["data"]

    async def query(self, expression: str) -> list[dict[str, Any]]:
        """An instant query's vector (or [] when it has no sample)."""
        data = await self.api("query", query=expression)
        assert data["resultType"] == "vector", data
        result: list[dict[str, Any]] = data["result"]
        return result

    async def value(self, expression: str) -> float | None:
        """The single sample of an instant query, or None when it has none."""
        result = await self.query(expression)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    async def label_values(self, label: str, selector: str) -> list[str]:
        """The values of `label` among the series `selector` picks (Grafana's label_values)."""
        values: list[str] = await self.api(f"label/{label}/values", **{"match[]": selector})
        return values

    async def alerts(self) -> dict[str, dict[str, Any]]:
        """Active alerts (pending or firing) by name."""
        data = await self.api("alerts")
        return {alert["labels"]["alertname"]: alert for alert in data["alerts"]}

    async def ready(self) -> bool:
        try:
            async with (
                aiohttp.ClientSession(timeout=HTTP_TIMEOUT) as session,
                session.get(f"{self.url}/-/ready") as reply,
            ):
                return reply.status == 200
        except aiohttp.ClientError:
            return False

    def describe(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else "(no log)"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def prometheus(
    folder: Path,
    targets: Sequence[str],
    rule_files: Sequence[Path],
    scrape_configs: Sequence[dict[str, Any]] = (),
) -> AsyncIterator[Prometheus]:
    """Scraping `targets` as the job `slot-expiration`, or as `scrape_configs` say."""
    binary = shutil.which("prometheus")
    assert binary is not None, "prometheus is missing: ./scripts/test installs it"
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": list(scrape_configs)
        or [{"job_name": "slot-expiration", "static_configs": [{"targets": list(targets)}]}],
    }
    (folder / "prometheus.yml").write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
    address = f"127.0.0.1:{free_port()}"
    log = folder / "prometheus.log"
    with log.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            binary,
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address={address}",
            "--log.level=warn",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
        )
    server = Prometheus(f"http://{address}", log)
    try:
        await eventually(server.ready, "Prometheus ready", READY_TIMEOUT_SECONDS)
        yield server
    finally:
        await _stop(process)


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with suppress(ProcessLookupError):
            process.terminate()
        try:
            async with asyncio.timeout(STOP_TIMEOUT_SECONDS):
                await process.wait()
        except TimeoutError:
            with suppress(ProcessLookupError):
                process.kill()
            await process.wait()
