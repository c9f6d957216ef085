"""The worker's HTTP endpoint seen from outside: where it listens, what it answers."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.command import Running

SERVING_EVENT = "endpoint.serving"
HTTP_TIMEOUT = aiohttp.ClientTimeout(total=10)


async def endpoint_url(worker: Running) -> str:
    """The base URL the worker logged once it listened (port 0 resolved)."""
    await worker.until(lambda: worker.logged(SERVING_EVENT), "serving its endpoint")
    (event,) = [e for e in worker.log_events() if e["event"] == SERVING_EVENT]
    return str(event["url"])


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession(timeout=HTTP_TIMEOUT) as session, session.get(url) as reply:
        return reply.status, await reply.text()


async def get_json(url: str) -> tuple[int, dict[str, Any]]:
    status, text = await get(url)
    document = json.loads(text)
    assert isinstance(document, dict), text
    return status, document


def sample(exposition: str, name: str, **labels: str) -> float | None:
    """One sample's value in a Prometheus text exposition, or None when absent."""
    for family in text_string_to_metric_families(exposition):
        for found in family.samples:
            if found.name == name and found.labels == labels:
                return float(found.value)
    return None
