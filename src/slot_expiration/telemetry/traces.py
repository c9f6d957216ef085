"""Traces with OpenTelemetry: a span per cycle, a child span per batch.

The tracing sink wraps the other sinks rather than sitting beside them: it opens a
cycle's span (and makes it current) before they hear of the cycle, and ends it
after they heard how it ended, so every log line of the cycle carries its
`trace_id` (see `add_trace_id`). Spans carry counts, ids (run, slot, tenant)
and SQLSTATEs; never a database message, a URL or personal data. The tenant
ids on a batch span are bounded.

Spans leave the process only when the standard OTEL_* variables ask for an
OTLP exporter; otherwise the tracer is OpenTelemetry's no-op one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final
from uuid import UUID

from opentelemetry import context, trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from slot_expiration.expiry import (
    BacklogMeasured,
    BatchCommitted,
    BatchResult,
    BatchStarted,
    ClockCompared,
    CycleEnded,
    CycleStarted,
    sqlstate_of,
)
from slot_expiration.loop import Event, Sink

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

INSTRUMENTATION: Final = "slot_expiration"
CYCLE_SPAN: Final = "slot_expiration.expiry"
BATCH_SPAN: Final = "slot_expiration.batch"
# A batch touches up to batch_size slots (twice that when topping up past poison
# rows): its span names at most this many distinct tenants and failed slots.
MAX_TENANT_IDS: Final = 20
MAX_FAILURE_EVENTS: Final = 20
DEFAULT_SERVICE_NAME: Final = "slot-expiration"


class TracingConfigError(ValueError):
    """The OTEL_* variables ask for something this worker cannot do."""


@dataclass(slots=True)
class _Open:
    span: Span
    token: object  # the context token that made the span current


class TracedSink:
    """Records each cycle and batch as spans around the `inner` sink."""

    def __init__(self, inner: Sink, tracer: Tracer) -> None:
        self._inner = inner
        self._tracer = tracer
        self._cycles: dict[UUID, _Open] = {}
        self._batches: dict[UUID, _Open] = {}

    def __call__(self, event: Event) -> None:
        match event:
            case CycleStarted(run_id, as_of):
                self._open_cycle(run_id, as_of)
                self._inner(event)
            case BatchStarted(run_id, number):
                self._open_batch(run_id, number)
                self._inner(event)
            case BatchCommitted(run_id, batch):
                self._inner(event)
                if (opened := self._batches.pop(run_id, None)) is not None:
                    _describe_batch(opened.span, batch)
                    _close(opened)
            case CycleEnded():
                self._cycle_ended(event)
            case _:
                self._inner(event)
                self._describe_cycle(event)

    def _open_cycle(self, run_id: UUID, as_of: datetime) -> None:
        span = self._tracer.start_span(
            CYCLE_SPAN,
            attributes={
                "correlation_id": str(run_id),
                "slot_expiration.run_id": str(run_id),
                "slot_expiration.as_of": as_of.isoformat(),
            },
        )
        self._cycles[run_id] = _Open(span, context.attach(trace.set_span_in_context(span)))

    def _open_batch(self, run_id: UUID, number: int) -> None:
        cycle = self._cycles.get(run_id)
        parent = trace.set_span_in_context(cycle.span) if cycle is not None else None
        span = self._tracer.start_span(
            BATCH_SPAN,
            context=parent,
            attributes={"slot_expiration.run_id": str(run_id), "slot_expiration.batch": number},
        )
        self._batches[run_id] = _Open(span, context.attach(trace.set_span_in_context(span)))

    def _describe_cycle(self, event: Event) -> None:
        """What the cycle measured, on its span."""
        match event:
            case ClockCompared(run_id, skew_seconds) if run_id in self._cycles:
                self._cycles[run_id].span.set_attribute(
                    "slot_expiration.clock_skew_seconds", skew_seconds
                )
            case BacklogMeasured(run_id, backlog, quarantined) if run_id in self._cycles:
                self._cycles[run_id].span.set_attributes(
                    {
                        "slot_expiration.backlog": backlog,
                        "slot_expiration.quarantined_slots": quarantined,
                    }
                )

    def _cycle_ended(self, ended: CycleEnded) -> None:
        # The batch in flight rolled back: it ends first, and the sinks hear of the
        # end under the cycle's own span.
        result, error = ended.result, ended.error
        why = "the cycle ended before the batch did"
        self._close_batch_in_flight(
            result.run_id, why if error is None else f"rolled back: {type(error).__name__}"
        )
        opened = self._cycles.pop(result.run_id, None)
        with _current(opened):
            self._inner(ended)
        if opened is None:
            return
        opened.span.set_attributes(
            {
                "slot_expiration.outcome": result.outcome.value,
                "slot_expiration.batches": result.batches,
                "slot_expiration.expired_count": result.expired_count,
                "slot_expiration.skipped_locked_count": result.skipped_locked_count,
                "slot_expiration.failed_count": result.failed_count,
            }
        )
        if result.stop_reason is not None:
            opened.span.set_attribute("slot_expiration.stop_reason", result.stop_reason.value)
        if error is None:
            opened.span.set_status(Status(StatusCode.OK))
        else:
            opened.span.set_attribute("error.type", type(error).__name__)
            if (sqlstate := sqlstate_of(error)) is not None:
                opened.span.set_attribute("db.response.status_code", sqlstate)
            # The type only: a driver's message may quote data or connection details.
            reason = f"{result.outcome.value}: {type(error).__name__}"
            opened.span.set_status(Status(StatusCode.ERROR, reason))
        _close(opened)

    def _close_batch_in_flight(self, run_id: UUID, why: str) -> None:
        """End a batch span the cycle's end cut short, without detaching it.

        The cycle body may run in a task of its own (its hard budget): that task's
        context made the batch span current and is gone now; in ours, resetting the
        cycle's own token (next) restores what came before the cycle anyway.
        """
        opened = self._batches.pop(run_id, None)
        if opened is not None:
            opened.span.set_status(Status(StatusCode.ERROR, why))
            opened.span.end()


def tracing_on(tracer: Tracer) -> bool:
    """Whether spans are recorded: the OTEL_* variables asked for an exporter."""
    return not isinstance(tracer, trace.NoOpTracer)


def traced(inner: Sink, tracer: Tracer) -> Sink:
    """`inner` inside each cycle's span, or `inner` alone when nothing records spans:
    building their attributes for a no-op tracer costs a batch about 0.3 ms."""
    return TracedSink(inner, tracer) if tracing_on(tracer) else inner


def _describe_batch(span: Span, batch: BatchResult) -> None:
    # The tenants of the rows it failed: the batch statement returns no ids (one form,
    # counts only, for every batch), and a failed row is what a tenant asks about.
    tenants = sorted({str(failure.slot.tenant_id) for failure in batch.failures})
    span.set_attributes(
        {
            "slot_expiration.expired_count": batch.expired_count,
            "slot_expiration.failed_count": batch.failed_count,
            "slot_expiration.skipped_locked_count": batch.skipped_locked_count,
            "slot_expiration.tenant_count": len(tenants),
            "slot_expiration.tenant_ids": tenants[:MAX_TENANT_IDS],
            "slot_expiration.tenant_ids_truncated": len(tenants) > MAX_TENANT_IDS,
        }
    )
    for failure in batch.failures[:MAX_FAILURE_EVENTS]:
        span.add_event(
            "item.failed",
            {
                "slot_expiration.slot_id": str(failure.slot.id),
                "slot_expiration.tenant_id": str(failure.slot.tenant_id),
                "slot_expiration.sqlstate": failure.sqlstate,
                "slot_expiration.attempts": failure.attempts,
            },
        )
    span.set_status(Status(StatusCode.OK))


def _current(opened: _Open | None) -> AbstractContextManager[object]:
    """Make the cycle's span current again, whatever a batch left current before it."""
    if opened is None:
        return nullcontext()
    return trace.use_span(opened.span, record_exception=False, set_status_on_exception=False)


def _close(opened: _Open) -> None:
    opened.span.end()
    context.detach(opened.token)  # type: ignore[arg-type]  # the token attach() returned


def add_trace_id(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """A structlog processor: log lines written inside a recorded span carry its ids."""
    span_context = trace.get_current_span().get_span_context()
    if span_context.is_valid:
        event_dict.setdefault("trace_id", trace.format_trace_id(span_context.trace_id))
        event_dict.setdefault("span_id", trace.format_span_id(span_context.span_id))
    return event_dict


# The values of OTEL_TRACES_EXPORTER this worker acts on; `none` turns traces off.
SUPPORTED_EXPORTERS: Final = frozenset({"otlp", "none"})


def _exporters(environ: Mapping[str, str]) -> set[str]:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return set()
    named = environ.get("OTEL_TRACES_EXPORTER", "").split(",")
    return {name.strip().lower() for name in named} - {""}


def unsupported_exporters(environ: Mapping[str, str]) -> list[str]:
    """The exporters OTEL_TRACES_EXPORTER names that this worker cannot send spans to
    (zipkin, console, ...): each is ignored, which the worker says once at start."""
    return sorted(_exporters(environ) - SUPPORTED_EXPORTERS)


def otlp_requested(environ: Mapping[str, str]) -> bool:
    """Whether the standard variables ask for spans to be exported over OTLP."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = _exporters(environ)
    if exporters:
        return "otlp" in exporters
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def provider_from_environment(environ: Mapping[str, str]) -> TracerProvider | None:
    """An SDK provider exporting over OTLP/HTTP when the environment asks, else None."""
    if not otlp_requested(environ):
        return None
    protocol = environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    )
    if protocol.strip() not in ("", "http/protobuf"):
        raise TracingConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol.strip()} is not supported: "
            "this worker exports traces over OTLP http/protobuf"
        )
    # The SDK and the exporter load only when asked for: together about 4 MB resident.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
        OTLPSpanExporter,
    )
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415

    service = environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    # The exporter reads its endpoint, headers and timeout from OTEL_EXPORTER_OTLP_*.
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


@contextmanager
def tracing(environ: Mapping[str, str] | None = None) -> Iterator[Tracer]:
    """The tracer for the process's cycles; spans still buffered are flushed at the end."""
    provider = provider_from_environment(os.environ if environ is None else environ)
    if provider is None:
        yield trace.NoOpTracer()
        return
    try:
        yield provider.get_tracer(INSTRUMENTATION)
    finally:
        provider.shutdown()
