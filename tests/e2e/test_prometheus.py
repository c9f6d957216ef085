"""A real Prometheus scrapes a running worker: the counters read back through its HTTP API,
the shipped alert rules evaluate, the backlog alert goes pending, and every dashboard query, its
variables chosen as Grafana would from what Prometheus holds, has data."""

from __future__ import annotations

import signal
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.e2e.command import eventually, started
from tests.e2e.endpoint import endpoint_url
from tests.e2e.prometheus import Prometheus, prometheus
from tests.support.dashboard import (
    TEMPLATE_VARIABLES,
    label_values_query,
    queries,
    rate_interval,
    regex_value,
    substitute,
)
from tests.support.database import SlotDatabase, rows_locked
from tests.support.promtool import ALERTS, RUNBOOK_BASE

pytestmark = pytest.mark.e2e

DUE, BATCH = 6_000, 500
WAIT_SECONDS = 45.0
SCRAPE_SECONDS = 1  # tests.e2e.prometheus's scrape interval
# Test-side SQL: a backlog of DUE slots that started over the last DUE minutes.
SEED = """
INSERT INTO availability_slots
SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(),
       now() - i * interval '1 minute', now() - i * interval '1 minute' + interval '30 minutes',
       'Available', 1, now() - interval '30 days', now() - interval '30 days'
FROM generate_series(1, %(due)s) AS i
"""


# Test-side SQL: the `count` latest due slots, which a transaction of the test holds.
LATEST_DUE = """
SELECT id FROM availability_slots ORDER BY start_at DESC LIMIT %(count)s
"""


async def _holds(server: Prometheus, expression: str, expected: float) -> bool:
    return await server.value(expression) == expected


async def test_prometheus_reads_the_counters_and_the_backlog_alert_goes_pending(
    db: SlotDatabase, secret_url: str, tmp_path: Path
) -> None:
    await db.conn.execute(SEED, {"due": DUE})
    cursor = await db.conn.execute(LATEST_DUE, {"count": DUE - BATCH})
    held = [row[0] for row in await cursor.fetchall()]
    # A cycle a second: the first expires the BATCH oldest, the others find the rest locked
    # (a booking holds them): the backlog stays at DUE - BATCH, not coming down.
    args = ("run", "--interval-seconds", "1", "--batch-size", str(BATCH))
    async with rows_locked(db.url, held), started(*args, "--database-url", secret_url) as worker:
        target = urlsplit(await endpoint_url(worker)).netloc
        async with prometheus(tmp_path, [target], [ALERTS]) as server:
            try:
                await _scraped_and_evaluated(server, target)
            except AssertionError as failure:
                raise AssertionError(
                    f"{failure}\n--- prometheus log\n{server.describe()}"
                ) from None
        worker.send_signal(signal.SIGTERM)
        done = await worker.wait()

    assert done.returncode == 0, done.describe()


async def _scraped_and_evaluated(server: Prometheus, target: str) -> None:
    async def wait(expression: str, expected: float) -> None:
        await eventually(
            lambda: _holds(server, expression, expected),
            f"{expression} == {expected}",
            WAIT_SECONDS,
        )

    await wait('up{job="slot-expiration"}', 1)
    await wait("calendar_slot_expiration_items_total", BATCH)
    await wait("calendar_slot_expiration_backlog", DUE - BATCH)
    await wait("calendar_slot_expiration_interval_seconds", 1)
    # Two successful cycles in a row: the replica has a trend, and it is flat.
    await wait("calendar_slot_expiration_backlog_change", 0)

    async def only_the_backlog_alert_pending() -> bool:
        alerts = await server.alerts()
        return set(alerts) == {"SlotExpirationBacklogHigh"} and all(
            alert["state"] == "pending" for alert in alerts.values()
        )

    await eventually(only_the_backlog_alert_pending, "the backlog alert pending", WAIT_SECONDS)
    alert = (await server.alerts())["SlotExpirationBacklogHigh"]
    assert float(alert["value"]) == DUE - BATCH
    assert alert["labels"]["severity"] == "warning"
    assert alert["annotations"]["runbook_url"].startswith(f"{RUNBOOK_BASE}#")
    assert alert["labels"]["job"] == "slot-expiration"

    groups = (await server.api("rules"))["groups"]
    rules = {rule["name"]: rule for group in groups for rule in group["rules"]}
    assert set(rules) == {
        "namespace_job:calendar_slot_expiration_last_success_timestamp_seconds:max",
        "namespace_job:calendar_slot_expiration_interval_seconds:max",
        "SlotExpirationNoSuccessfulCycle",
        "SlotExpirationNotReporting",
        "SlotExpirationBacklogHigh",
        "SlotExpirationItemErrors",
        "SlotExpirationMisconfigured",
    }
    assert {rule["health"] for rule in rules.values()} == {"ok"}, rules

    chosen = await _variables_as_grafana_chooses_them(server)
    # The worker's job and replica are found and chosen; it has no namespace label outside
    # Kubernetes, so that variable stays at All.
    assert chosen == {
        "namespace": ".*",
        "job": regex_value(["slot-expiration"]),
        "instance": regex_value([target]),
    }
    for query in queries():
        promql = substitute(
            query.expr,
            chosen,
            rate_interval_seconds=rate_interval(query, SCRAPE_SECONDS),
            range_seconds=3600,
        )

        async def has_data(promql: str = promql) -> bool:
            return bool(await server.query(promql))

        await eventually(has_data, f"dashboard data for {promql}", WAIT_SECONDS)


async def _variables_as_grafana_chooses_them(server: Prometheus) -> dict[str, str]:
    """Each variable's label_values query, run in order with the ones before it chosen; every
    value found is selected (All when none is)."""
    chosen: dict[str, str] = {}
    for name in TEMPLATE_VARIABLES:
        selector, label = label_values_query(name)
        for earlier, value in chosen.items():
            selector = selector.replace(f"${earlier}", value)
        chosen[name] = regex_value(await server.label_values(label, selector))
    return chosen
