"""An observer never breaks the observed: a sink that raises is reported (counted each time,
logged once per sink and kind of error) and every other sink still gets the event."""

from __future__ import annotations

from uuid import uuid4

from opentelemetry.trace import NoOpTracer
from structlog.testing import capture_logs

from slot_expiration.expiry import BatchStarted
from slot_expiration.loop import Event, SinkFailures, fan_out
from slot_expiration.loop.events import SINK_FAILED
from slot_expiration.telemetry.liveness import Liveness
from slot_expiration.telemetry.metrics import PREFIX, Metrics
from slot_expiration.telemetry.readiness import Readiness
from slot_expiration.worker.observability import Observability


class Raising:
    """A sink that fails on every event, as a log sink on a full device would."""

    def __call__(self, event: Event) -> None:
        raise OSError(28, "No space left on device")


def test_a_raising_sink_is_passed_over_and_every_other_sink_still_gets_each_event() -> None:
    seen: list[Event] = []
    counted: list[str] = []
    emit = fan_out(Raising(), seen.append, on_failure=SinkFailures(count=counted.append))
    events = [BatchStarted(uuid4(), number) for number in (1, 2, 3)]

    with capture_logs() as logged:
        for event in events:
            emit(event)

    assert seen == events
    assert counted == ["Raising"] * 3
    failures = [line for line in logged if line["event"] == SINK_FAILED]
    assert len(failures) == 1  # once per sink and kind, not once per event
    assert (failures[0]["sink"], failures[0]["error_type"]) == ("Raising", "OSError")
    assert failures[0]["log_level"] == "error"


def test_reporting_a_failure_never_raises_even_when_logging_itself_fails() -> None:
    def broken_count(sink: str) -> None:
        raise RuntimeError(sink)

    emit = fan_out(Raising(), on_failure=SinkFailures(count=broken_count))

    emit(BatchStarted(uuid4(), 1))  # nothing escapes


async def _no_revision() -> str | None:
    return None


def test_each_sink_of_the_worker_exports_its_failures_from_zero_and_counts_each() -> None:
    """Series from 0, so that rate() sees a sink's first failure and the dashboard's sink
    panel reads 0 (not no data) while none fails."""
    metrics = Metrics()
    observability = Observability(
        metrics, Liveness(300.0, 240.0), Readiness(_no_revision, None), NoOpTracer()
    )
    emit = observability.sink([Raising()])
    failures = f"{PREFIX}_sink_failures_total"

    for sink in ("Raising", "Metrics", "Liveness", "Readiness"):
        assert metrics.registry.get_sample_value(failures, {"sink": sink}) == 0, sink
    emit(BatchStarted(uuid4(), 1))
    emit(BatchStarted(uuid4(), 2))
    assert metrics.registry.get_sample_value(failures, {"sink": "Raising"}) == 2
    assert metrics.registry.get_sample_value(failures, {"sink": "Metrics"}) == 0
