"""The metrics sink's exposition as Prometheus's own tool reads it: `promtool check metrics`
accepts it, without a lint finding, once a cycle with a failed row and a skipped tick are in."""

from __future__ import annotations

from uuid import uuid4

import pytest

from slot_expiration.expiry import BatchCommitted, CycleEnded, CycleStarted
from slot_expiration.loop import TickSkipped
from slot_expiration.telemetry.metrics import Metrics
from tests.support.promtool import promtool
from tests.support.results import AS_OF, FakeClock, batch, cycle_result, failure

pytestmark = pytest.mark.deploy


def test_promtool_check_metrics_accepts_the_exposition() -> None:
    metrics = Metrics(wall_clock=FakeClock(1_796_000_000.0))
    run_id = uuid4()
    for event in (
        CycleStarted(run_id, AS_OF),
        BatchCommitted(run_id, batch(expired=5, failures=[failure()])),
        CycleEnded(cycle_result(run_id=run_id, expired=5, failed=1, backlog=7)),
        TickSkipped(1),
    ):
        metrics(event)

    checked = promtool("check", "metrics", stdin=metrics.exposition())

    assert checked.returncode == 0, checked.output
    assert checked.output.strip() == "", checked.output  # no lint finding either
