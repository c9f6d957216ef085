"""An observer never breaks the observed: a sink that raises is reported (counted each time,
logged once per sink and kind of error) and every other sink still gets the event."""

from __future__ import annotations

from uuid import uuid4

from structlog.testing import capture_logs

from slot_expiration.expiry import BatchStarted
from slot_expiration.loop import Event, SinkFailures, fan_out
from slot_expiration.loop.events import SINK_FAILED


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
