"""Traces: a span per cycle around the other sinks, a child span per batch, bounded tenants."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from uuid import UUID, uuid4

import pytest
import structlog
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from slot_expiration.domain import CycleOutcome
from slot_expiration.expiry import (
    BacklogMeasured,
    BatchCommitted,
    BatchResult,
    BatchStarted,
    CycleEnded,
    CycleFailed,
    CycleResult,
    CycleRun,
    CycleStarted,
    run_cycle,
)
from slot_expiration.loop import Event, LoopStarted, LoopStopped, LoopStopping, TickSkipped
from slot_expiration.options import LogFormat
from slot_expiration.telemetry import LogSink, configure_logging
from slot_expiration.telemetry.traces import (
    BATCH_SPAN,
    CYCLE_SPAN,
    MAX_FAILURE_EVENTS,
    MAX_TENANT_IDS,
    TracedSink,
    TracingConfigError,
    otlp_requested,
    provider_from_environment,
)
from tests.support.results import AS_OF, batch, cycle_result, ended, failure, slot_refs


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def _tracer(exporter: InMemorySpanExporter) -> trace.Tracer:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test")


class CurrentSpanSeen:
    """An inner sink that records which span was current when it heard each kind of event."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def __call__(self, event: Event) -> None:
        self.seen[type(event).__name__] = trace.get_current_span().get_span_context().span_id


def _by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def _run_cycle(recorded: TracedSink, batches: list[BatchResult], run_id: UUID) -> None:
    recorded(CycleStarted(run_id, AS_OF))
    for item in batches:
        recorded(BatchStarted(run_id, item.number))
        recorded(BatchCommitted(run_id, item))
    expired = sum(b.expired_count for b in batches)
    recorded(CycleEnded(cycle_result(run_id=run_id, expired=expired, batches=len(batches))))


def test_a_cycle_is_one_span_with_the_run_id_as_correlation_id_and_a_child_per_batch(
    exporter: InMemorySpanExporter,
) -> None:
    recorded = TracedSink(CurrentSpanSeen(), _tracer(exporter))
    run_id = uuid4()
    _run_cycle(recorded, [batch(expired=3, number=1), batch(expired=2, number=2)], run_id)

    spans = exporter.get_finished_spans()
    (cycle,) = _by_name(spans, CYCLE_SPAN)
    batches = _by_name(spans, BATCH_SPAN)
    assert cycle.attributes is not None
    assert cycle.attributes["correlation_id"] == str(run_id)
    assert cycle.attributes["slot_expiration.run_id"] == str(run_id)
    assert cycle.attributes["slot_expiration.as_of"] == AS_OF.isoformat()
    assert cycle.attributes["slot_expiration.expired_count"] == 5
    assert cycle.status.status_code is StatusCode.OK
    assert [b.attributes["slot_expiration.batch"] for b in batches if b.attributes] == [1, 2]
    for child in batches:
        assert child.parent is not None
        assert child.parent.span_id == cycle.context.span_id
        assert child.context.trace_id == cycle.context.trace_id


def test_the_backlog_and_quarantine_measured_reach_the_sinks_and_the_cycle_span(
    exporter: InMemorySpanExporter,
) -> None:
    inner = CurrentSpanSeen()
    recorded = TracedSink(inner, _tracer(exporter))
    run_id = uuid4()
    recorded(CycleStarted(run_id, AS_OF))
    recorded(BacklogMeasured(run_id, 9, 4))
    recorded(CycleEnded(cycle_result(run_id=run_id)))

    (cycle,) = _by_name(exporter.get_finished_spans(), CYCLE_SPAN)
    assert (cycle.attributes or {})["slot_expiration.quarantined_slots"] == 4
    assert (cycle.attributes or {})["slot_expiration.backlog"] == 9
    assert inner.seen["BacklogMeasured"] == cycle.context.span_id


def test_a_batch_span_names_the_tenants_of_the_rows_it_failed(
    exporter: InMemorySpanExporter,
) -> None:
    tenant, other = uuid4(), uuid4()
    poisons = [
        failure(slot_refs(1, tenant_id=tenant)[0], sqlstate="23514", attempts=2),
        failure(slot_refs(1, tenant_id=other)[0], sqlstate="23514"),
        failure(slot_refs(1, tenant_id=tenant)[0], sqlstate="23514"),
    ]
    recorded = TracedSink(CurrentSpanSeen(), _tracer(exporter))
    _run_cycle(recorded, [batch(expired=4, failures=poisons)], uuid4())

    (span,) = _by_name(exporter.get_finished_spans(), BATCH_SPAN)
    attributes = dict(span.attributes or {})
    assert attributes["slot_expiration.tenant_ids"] == tuple(sorted([str(tenant), str(other)]))
    assert attributes["slot_expiration.tenant_count"] == 2
    assert attributes["slot_expiration.tenant_ids_truncated"] is False
    assert attributes["slot_expiration.expired_count"] == 4
    assert attributes["slot_expiration.failed_count"] == 3
    first = span.events[0]
    assert first.name == "item.failed"
    assert dict(first.attributes or {}) == {
        "slot_expiration.slot_id": str(poisons[0].slot.id),
        "slot_expiration.tenant_id": str(tenant),
        "slot_expiration.sqlstate": "23514",
        "slot_expiration.attempts": 2,
    }


def test_tenant_ids_and_failure_events_on_a_batch_span_are_bounded(
    exporter: InMemorySpanExporter,
) -> None:
    failures = [failure() for _ in range(MAX_FAILURE_EVENTS + 30)]
    recorded = TracedSink(CurrentSpanSeen(), _tracer(exporter))
    _run_cycle(recorded, [batch(expired=500, failures=failures)], uuid4())

    (span,) = _by_name(exporter.get_finished_spans(), BATCH_SPAN)
    attributes = dict(span.attributes or {})
    assert len(attributes["slot_expiration.tenant_ids"]) == MAX_TENANT_IDS  # type: ignore[arg-type]
    assert attributes["slot_expiration.tenant_count"] == len(failures)
    assert attributes["slot_expiration.tenant_ids_truncated"] is True
    assert len(span.events) == MAX_FAILURE_EVENTS


def test_the_cycle_span_is_current_for_every_sink_from_cycle_started_to_its_end(
    exporter: InMemorySpanExporter,
) -> None:
    inner = CurrentSpanSeen()
    recorded = TracedSink(inner, _tracer(exporter))
    _run_cycle(recorded, [batch(expired=1)], uuid4())

    spans = exporter.get_finished_spans()
    (cycle,) = _by_name(spans, CYCLE_SPAN)
    (child,) = _by_name(spans, BATCH_SPAN)
    assert inner.seen["CycleStarted"] == cycle.context.span_id
    assert inner.seen["BatchStarted"] == child.context.span_id
    assert inner.seen["BatchCommitted"] == child.context.span_id
    assert inner.seen["CycleEnded"] == cycle.context.span_id
    assert not trace.get_current_span().get_span_context().is_valid  # detached afterwards


@pytest.mark.parametrize("outcome", [CycleOutcome.BUDGET_EXCEEDED, CycleOutcome.FAILED])
def test_a_failed_cycle_ends_its_span_and_the_batch_in_flight_as_errors_without_the_message(
    exporter: InMemorySpanExporter, outcome: CycleOutcome
) -> None:
    inner = CurrentSpanSeen()
    recorded = TracedSink(inner, _tracer(exporter))
    run_id = uuid4()
    recorded(CycleStarted(run_id, AS_OF))
    recorded(BatchStarted(run_id, 1))
    secret = "password=s3cret host db.internal"  # noqa: S105 - what must never leak
    recorded(ended(outcome, ConnectionError(secret), run_id=run_id, batch_in_flight=True))

    spans = exporter.get_finished_spans()
    (cycle,) = _by_name(spans, CYCLE_SPAN)
    (child,) = _by_name(spans, BATCH_SPAN)
    assert cycle.status.status_code is StatusCode.ERROR
    assert cycle.attributes is not None
    assert cycle.attributes["error.type"] == "ConnectionError"
    assert cycle.attributes["slot_expiration.outcome"] == outcome.value
    assert cycle.status.description == f"{outcome.value}: ConnectionError"
    assert child.status.status_code is StatusCode.ERROR
    assert secret not in repr([s.to_json() for s in spans])
    assert inner.seen["CycleEnded"] == cycle.context.span_id
    assert not trace.get_current_span().get_span_context().is_valid


def test_events_outside_a_cycle_pass_through_without_a_span(
    exporter: InMemorySpanExporter,
) -> None:
    inner = CurrentSpanSeen()
    recorded = TracedSink(inner, _tracer(exporter))
    for event in (
        LoopStarted(300.0, 500),
        TickSkipped(1),
        LoopStopping(cycle_in_flight=False),
        LoopStopped(),
    ):
        recorded(event)

    assert exporter.get_finished_spans() == ()
    assert set(inner.seen) == {"LoopStarted", "TickSkipped", "LoopStopping", "LoopStopped"}
    assert set(inner.seen.values()) == {0}


def test_the_no_op_tracer_records_nothing_and_log_lines_carry_no_trace_id(
    capsys: pytest.CaptureFixture[str], restore_logging: None
) -> None:
    configure_logging(LogFormat.JSON)
    recorded = TracedSink(LogSink(), trace.NoOpTracer())
    _run_cycle(recorded, [batch(expired=1)], uuid4())

    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [line["event"] for line in lines] == [
        "cycle.started",
        "batch.selected",
        "cycle.completed",
    ]
    assert all("trace_id" not in line for line in lines)


def test_every_log_line_of_a_cycle_carries_its_trace_id_and_the_loop_lines_do_not(
    exporter: InMemorySpanExporter, capsys: pytest.CaptureFixture[str], restore_logging: None
) -> None:
    configure_logging(LogFormat.JSON)
    recorded = TracedSink(LogSink(), _tracer(exporter))
    recorded(LoopStarted(300.0, 500))
    _run_cycle(recorded, [batch(expired=2, failures=[failure()])], uuid4())
    recorded(LoopStopped())

    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    (cycle,) = _by_name(exporter.get_finished_spans(), CYCLE_SPAN)
    trace_id = trace.format_trace_id(cycle.context.trace_id)
    in_cycle = [line for line in lines if not line["event"].startswith("worker.")]
    assert [line["event"] for line in in_cycle] == [
        "cycle.started",
        "batch.selected",
        "item.failed",
        "cycle.completed",
    ]
    assert {line["trace_id"] for line in in_cycle} == {trace_id}
    assert all("trace_id" not in line for line in lines if line["event"].startswith("worker."))


@pytest.fixture
def restore_logging() -> Iterator[None]:
    yield
    structlog.reset_defaults()


@pytest.mark.parametrize(
    ("environ", "requested"),
    [
        ({}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "console,otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_SERVICE_NAME": "slot-expiration"}, False),
    ],
)
def test_spans_are_exported_only_when_the_standard_variables_ask_for_otlp(
    environ: dict[str, str], requested: bool
) -> None:
    assert otlp_requested(environ) is requested


def test_without_otel_variables_there_is_no_provider_at_all() -> None:
    assert provider_from_environment({}) is None


def test_an_otlp_protocol_other_than_http_protobuf_is_refused_with_one_clear_message() -> None:
    environ = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}

    with pytest.raises(TracingConfigError, match=r"grpc is not supported.*http/protobuf"):
        provider_from_environment(environ)


def test_the_exporting_provider_names_the_service_slot_expiration_unless_told_otherwise() -> None:
    provider = provider_from_environment({"OTEL_TRACES_EXPORTER": "otlp"})
    named = provider_from_environment({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SERVICE_NAME": "x"})
    assert provider is not None
    assert named is not None
    try:
        assert provider.resource.attributes["service.name"] == "slot-expiration"
        assert named.resource.attributes["service.name"] == "x"
    finally:
        provider.shutdown()
        named.shutdown()


async def test_a_budget_that_cuts_a_batch_short_ends_both_spans_and_logs_no_context_error(
    exporter: InMemorySpanExporter, capsys: pytest.CaptureFixture[str], restore_logging: None
) -> None:
    """The cycle body runs in a task of its own; its batch span is cut by the budget."""
    configure_logging(LogFormat.JSON)
    recorded = TracedSink(LogSink(), _tracer(exporter))
    never = asyncio.Event()

    class HangingBatch:
        async def run(self, run: CycleRun) -> CycleResult:
            run.emit(BatchStarted(run.run_id, 1))
            await never.wait()  # a batch that never commits
            raise AssertionError("unreachable")

    with pytest.raises(CycleFailed):
        await run_cycle(HangingBatch(), recorded, budget_seconds=0.05, as_of=AS_OF)

    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [line["event"] for line in lines] == ["cycle.started", "cycle.failed"]
    spans = exporter.get_finished_spans()
    (cycle,) = _by_name(spans, CYCLE_SPAN)
    (child,) = _by_name(spans, BATCH_SPAN)
    assert cycle.status.status_code is child.status.status_code is StatusCode.ERROR
    assert {line["trace_id"] for line in lines} == {trace.format_trace_id(cycle.context.trace_id)}
    assert lines[1]["span_id"] == trace.format_span_id(cycle.context.span_id)
    assert not trace.get_current_span().get_span_context().is_valid
