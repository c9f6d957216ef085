"""A real Prometheus scrapes a running worker: the counters read back through its HTTP API,
the shipped alert rules evaluate, the backlog alert goes pending, and every dashboard query, its
variables chosen as Grafana would from what Prometheus holds, has data."""

from __future__ import annotations

import json
import signal
from functools import partial
from pathlib import Path
from typing import Any
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
        "namespace_job:calendar_slot_expiration_targets:count",
        "SlotExpirationNoSuccessfulCycle",
        "SlotExpirationNotReporting",
        "SlotExpirationBacklogHigh",
        "SlotExpirationItemErrors",
        "SlotExpirationMisconfigured",
        "SlotExpirationPausedTooLong",
        "SlotExpirationSinkFailing",
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


def _deployment(folder: Path, namespace: str, targets: list[str]) -> dict[str, Any]:
    """A scrape config as the PodMonitor's looks to the rules: job `<namespace>/slot-expiration`
    and a `namespace` label, its targets from a file Prometheus watches (as it watches pods)."""
    listing = folder / f"{namespace}.json"
    _write_targets(listing, namespace, targets)
    return {
        "job_name": f"{namespace}/slot-expiration",
        "file_sd_configs": [{"files": [str(listing)], "refresh_interval": "1s"}],
    }


def _write_targets(listing: Path, namespace: str, targets: list[str]) -> None:
    groups = [{"targets": targets, "labels": {"namespace": namespace}}] if targets else []
    staged = listing.with_suffix(".tmp")
    staged.write_text(json.dumps(groups), encoding="utf-8")
    staged.replace(listing)


async def test_a_deployment_whose_targets_vanish_beside_another_goes_pending_as_targets_gone(
    db: SlotDatabase, secret_url: str, tmp_path: Path
) -> None:
    """Two deployments scraped by one real Prometheus; every target of one vanishes (its pods
    gone: Prometheus drops them, their `up` ends). 0.3.0's rules said nothing of it until the
    no-success alert, 34 minutes later."""
    args = ("run", "--interval-seconds", "1", "--metrics-addr", "127.0.0.1:0")
    async with (
        started(*args, "--instance-id", "calendar-a", "--database-url", secret_url) as calendar,
        started(*args, "--instance-id", "staging-a", "--database-url", secret_url) as staging,
    ):
        calendar_target = urlsplit(await endpoint_url(calendar)).netloc
        staging_target = urlsplit(await endpoint_url(staging)).netloc
        configs = [
            _deployment(tmp_path, "calendar", [calendar_target]),
            _deployment(tmp_path, "staging", [staging_target]),
        ]
        async with prometheus(tmp_path, [], [ALERTS], configs) as server:
            try:
                await _vanished_and_pending(server, tmp_path / "calendar.json")
            except AssertionError as failure:
                raise AssertionError(
                    f"{failure}\n--- prometheus log\n{server.describe()}"
                ) from None


async def _vanished_and_pending(server: Prometheus, listing: Path) -> None:
    targets = "namespace_job:calendar_slot_expiration_targets:count"
    for namespace in ("calendar", "staging"):
        recorded = f'{targets}{{namespace="{namespace}"}}'
        await eventually(
            partial(_holds, server, recorded, 1), f"{namespace}'s target recorded", WAIT_SECONDS
        )
    _write_targets(listing, "calendar", [])
    await eventually(
        lambda: _holds(server, f'{targets}{{job="calendar/slot-expiration"}}', 0),
        "calendar's targets recorded gone",
        WAIT_SECONDS,
    )

    async def pending_for_calendar_alone() -> bool:
        data = await server.api("alerts")
        reporting = [
            a["labels"] for a in data["alerts"] if a["labels"]["alertname"] == NOT_REPORTING
        ]
        return reporting == [
            {
                "alertname": NOT_REPORTING,
                "namespace": "calendar",
                "job": "calendar/slot-expiration",
                "reason": "targets_gone",
                "severity": "warning",
            }
        ]

    await eventually(pending_for_calendar_alone, "NotReporting pending for calendar", WAIT_SECONDS)
    assert await server.value(f'{targets}{{job="staging/slot-expiration"}}') == 1
    (alert,) = [
        a
        for a in (await server.api("alerts"))["alerts"]
        if a["labels"]["alertname"] == NOT_REPORTING
    ]
    assert alert["state"] == "pending"  # `for: 10m`: promtool's cases show it firing
    assert alert["annotations"]["summary"] == (
        "Prometheus finds no replica of slot-expiration calendar/slot-expiration any more"
    )


NOT_REPORTING = "SlotExpirationNotReporting"
