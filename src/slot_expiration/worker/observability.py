"""The worker's telemetry beside its logs: metrics, liveness, readiness, traces, endpoint."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final

import structlog
from opentelemetry.trace import Tracer

from slot_expiration.db.session import ApplicationName
from slot_expiration.loop import Sink, SinkFailures, fan_out
from slot_expiration.options import WorkerOptions
from slot_expiration.schema.version import HEAD_REVISION
from slot_expiration.status.store import StatusStore
from slot_expiration.telemetry.endpoints import serving
from slot_expiration.telemetry.liveness import Liveness
from slot_expiration.telemetry.logs import LogEvent
from slot_expiration.telemetry.metrics import Metrics
from slot_expiration.telemetry.readiness import Readiness
from slot_expiration.telemetry.traces import traced

PROBE_TIMEOUT_SECONDS: Final = 5.0

Announce = Callable[[str], None]


def readiness_for(options: WorkerOptions) -> Readiness:
    url = options.require_database_url()

    async def schema_revision() -> str | None:
        # The probe's sessions are never counted as worker sessions by `status`.
        async with StatusStore.connect(url, ApplicationName.PROBE, PROBE_TIMEOUT_SECONDS) as store:
            return await store.schema_revision()

    return Readiness(schema_revision, HEAD_REVISION, PROBE_TIMEOUT_SECONDS)


@dataclass(frozen=True, slots=True)
class Observability:
    """What `run` records and serves besides its logs."""

    metrics: Metrics
    liveness: Liveness
    readiness: Readiness
    tracer: Tracer

    @classmethod
    def for_worker(cls, options: WorkerOptions, tracer: Tracer) -> Observability:
        return cls(
            metrics=Metrics(),
            liveness=Liveness(options.interval_seconds, options.max_cycle_seconds),
            readiness=readiness_for(options),
            tracer=tracer,
        )

    def sink(self, sinks: Sequence[Sink]) -> Sink:
        """`sinks` plus metrics, liveness and readiness, all inside each cycle's span."""
        failures = SinkFailures(count=self.metrics.sink_failed, watch=self.metrics.sinks_watched)
        recorded = fan_out(*sinks, self.metrics, self.liveness, self.readiness, on_failure=failures)
        spanned = traced(recorded, self.tracer)
        # The span's own work isolated too: nothing a sink does reaches the cycle. (Without
        # a span, `recorded` is what fan_out made: it raises nothing.)
        return recorded if spanned is recorded else fan_out(spanned, on_failure=failures)

    @asynccontextmanager
    async def endpoint(self, options: WorkerOptions) -> AsyncIterator[str | None]:
        """Serve /metrics, /healthz and /readyz while the block runs; yields the base URL
        (None when the endpoint is turned off)."""
        address = options.metrics_address
        if address is None:
            yield None
            return
        async with serving(
            address,
            self.metrics.registry,
            self.liveness.report,
            self.readiness.report,
            on_bad_request=self.metrics.http_bad_requests.inc,
        ) as url:
            yield url


def announce(url: str | None, on_serving: Announce | None = None) -> None:
    """Log where the endpoint listens (and tell `on_serving`), once the worker is sure to run."""
    if url is None:
        return
    structlog.get_logger("slot_expiration").info(LogEvent.ENDPOINT_SERVING, url=url)
    if on_serving is not None:
        on_serving(url)
