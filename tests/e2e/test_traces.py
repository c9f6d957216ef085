"""Traces leave the process over OTLP/HTTP when the OTEL_* variables ask, and the log lines of
a cycle carry its trace_id. The collector here is a receiver the test runs on loopback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.e2e.command import PASSWORD, run_command
from tests.support.database import SlotDatabase
from tests.support.slots import make_slot

pytestmark = pytest.mark.e2e


@dataclass
class Received:
    bodies: list[bytes] = field(default_factory=list)

    def spans(self) -> dict[str, list[dict[str, Any]]]:
        """Every span received, by name: ids in hex, attributes as plain values."""
        found: dict[str, list[dict[str, Any]]] = {}
        for body in self.bodies:
            request = ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        found.setdefault(span.name, []).append(
                            {
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex(),
                                "attributes": _attributes(span.attributes),
                                "resource": resource,
                            }
                        )
        return found


def _plain(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_plain(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _plain(pair.value) for pair in pairs}


@asynccontextmanager
async def otlp_receiver() -> AsyncIterator[tuple[str, Received]]:
    """An OTLP/HTTP endpoint on a free loopback port that keeps what it is sent."""
    received = Received()

    async def traces(request: web.Request) -> web.Response:
        received.bodies.append(await request.read())
        answer = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=answer, content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
        yield f"http://127.0.0.1:{port}", received
    finally:
        await runner.cleanup()


async def test_once_exports_a_cycle_span_with_its_batch_and_logs_carry_its_trace_id(
    db: SlotDatabase, secret_url: str
) -> None:
    now = datetime.now(UTC)
    slots = await db.insert(make_slot(timedelta(minutes=-m), as_of=now) for m in range(1, 4))

    async with otlp_receiver() as (endpoint, received):
        env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}
        done = await run_command("once", "--json", "--database-url", secret_url, env=env)

    assert done.returncode == 0, done.describe()
    run_id = json.loads(done.stdout)["run_id"]
    spans = received.spans()
    (cycle,) = spans["slot_expiration.expiry"]
    (batch,) = spans["slot_expiration.batch"]
    assert cycle["attributes"]["correlation_id"] == run_id
    assert cycle["attributes"]["slot_expiration.expired_count"] == 3
    assert cycle["resource"]["service.name"] == "slot-expiration"
    assert batch["trace_id"] == cycle["trace_id"]
    assert batch["parent_span_id"] == cycle["span_id"]
    assert batch["attributes"]["slot_expiration.expired_count"] == len(slots)
    # The tenants of the rows it failed: none here (the batch statement returns counts).
    assert batch["attributes"]["slot_expiration.tenant_count"] == 0
    events = done.log_events()
    in_cycle = [
        e for e in events if e["event"] in ("cycle.started", "batch.selected", "cycle.completed")
    ]
    assert len(in_cycle) == 3
    assert {e["trace_id"] for e in in_cycle} == {cycle["trace_id"]}
    assert all(PASSWORD.encode() not in body for body in received.bodies)


async def test_without_otel_variables_nothing_is_exported_and_logs_carry_no_trace_id(
    db: SlotDatabase, secret_url: str
) -> None:
    await db.insert([make_slot(timedelta(minutes=-1), as_of=datetime.now(UTC))])

    done = await run_command("once", "--database-url", secret_url)

    assert done.returncode == 0, done.describe()
    events = done.log_events()
    assert "cycle.completed" in [e["event"] for e in events]
    assert all("trace_id" not in e for e in events)


async def test_an_otlp_protocol_this_worker_cannot_speak_is_a_usage_error(secret_url: str) -> None:
    env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}

    done = await run_command("once", "--database-url", secret_url, env=env)

    assert done.returncode == 2, done.describe()
    assert done.stderr == (
        "slot-expiration: error: OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported: "
        "this worker exports traces over OTLP http/protobuf\n"
    )


async def test_an_unreachable_collector_does_not_fail_the_cycle_and_only_delays_the_exit(
    db: SlotDatabase, secret_url: str, closed_port: int
) -> None:
    slot = make_slot(timedelta(minutes=-1), as_of=datetime.now(UTC))
    await db.insert([slot])
    env = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{closed_port}",
        # The exporter retries until this timeout (10 s by default) when flushing at exit.
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
    }

    done = await run_command("once", "--json", "--database-url", secret_url, env=env)

    assert done.returncode == 0, done.describe()
    assert json.loads(done.stdout)["expired_count"] == 1
    warnings = [e for e in done.log_events() if e.get("logger", "").startswith("opentelemetry")]
    assert warnings, done.stderr  # the exporter's own complaint, as a JSON line like the rest
