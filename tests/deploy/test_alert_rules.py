"""deploy/prometheus/alerts.yml: valid, named as the issues give them, and shown firing and not
firing by `promtool test rules` (deploy/prometheus/alerts_test.yml, alerts_test_days.yml)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.dashboard import dashboard
from tests.support.promtool import (
    ALERTS,
    ALERTS_TEST,
    ALERTS_TEST_DAYS,
    DASHBOARD,
    RUNBOOK_BASE,
    promtool,
    runbook_anchors,
)

pytestmark = pytest.mark.deploy

ALERT_NAMES = (
    "SlotExpirationNoSuccessfulCycle",
    "SlotExpirationNotReporting",
    "SlotExpirationBacklogHigh",
    "SlotExpirationItemErrors",
    "SlotExpirationMisconfigured",
    "SlotExpirationPausedTooLong",
    "SlotExpirationSinkFailing",
)
# What the no-success alert reads: each deployment's last success and interval, remembered;
# what the not-reporting alert reads: each deployment's targets, remembered.
RECORDS = (
    "namespace_job:calendar_slot_expiration_last_success_timestamp_seconds:max",
    "namespace_job:calendar_slot_expiration_interval_seconds:max",
    "namespace_job:calendar_slot_expiration_targets:count",
)
# How a summary names the deployment: namespace/job; the job alone without a namespace, or
# when the job holds it already (the PodMonitor's `<namespace>/slot-expiration`).
DEPLOYMENT = (
    '{{ if not (match "/" $labels.job) }}{{ with $labels.namespace }}{{ . }}/{{ end }}{{ end }}'
    "{{ $labels.job }}"
)


def _document() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return document


def _rules() -> dict[str, dict[str, Any]]:
    return {
        rule["alert"]: rule
        for group in _document()["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }


def test_promtool_accepts_the_rule_file() -> None:
    checked = promtool("check", "rules", str(ALERTS))

    assert checked.returncode == 0, checked.output
    assert f"SUCCESS: {len(ALERT_NAMES) + len(RECORDS)} rules found" in checked.output


def test_the_alerts_are_named_exactly_as_the_issues_give_them() -> None:
    assert tuple(_rules()) == ALERT_NAMES
    records = [
        rule["record"] for g in _document()["groups"] for rule in g["rules"] if "record" in rule
    ]
    assert tuple(records) == RECORDS


@pytest.mark.parametrize("name", ALERT_NAMES)
def test_each_alert_has_a_severity_and_an_absolute_runbook_url_into_the_runbook(name: str) -> None:
    rule = _rules()[name]

    assert rule["labels"]["severity"] == rule["annotations"]["severity"] == "warning"
    base, _, anchor = rule["annotations"]["runbook_url"].partition("#")
    assert base == RUNBOOK_BASE
    assert anchor in runbook_anchors()


@pytest.mark.parametrize("name", ALERT_NAMES)
def test_each_alert_is_per_deployment_and_names_it_in_its_summary(name: str) -> None:
    rule = _rules()[name]

    assert "by (namespace, job)" in rule["expr"]
    for annotation in ("summary", "description"):
        assert DEPLOYMENT in rule["annotations"][annotation]
        assert "{{ $labels.namespace }}/" not in rule["annotations"][annotation]


def test_one_substitution_of_the_runbook_base_moves_every_runbook_link_and_nothing_else() -> None:
    """docs/operations.md, "Alerts": replacing the base's text in alerts.yml and the dashboard
    is enough."""
    other = "https://git.example.org/calendar/slot-expiration/-/blob/main/docs/runbooks/x.md"
    alerts = yaml.safe_load(ALERTS.read_text(encoding="utf-8").replace(RUNBOOK_BASE, other))
    board = json.loads(DASHBOARD.read_text(encoding="utf-8").replace(RUNBOOK_BASE, other))
    moved = {
        rule["alert"]: rule
        for group in alerts["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }

    for name, rule in _rules().items():
        url = rule["annotations"]["runbook_url"]
        assert moved[name]["annotations"]["runbook_url"] == url.replace(RUNBOOK_BASE, other)
        assert moved[name]["annotations"]["runbook_url"].startswith(f"{other}#")
        del moved[name]["annotations"]["runbook_url"], rule["annotations"]["runbook_url"]
        assert moved[name] == rule
    assert _urls(board) == [url.replace(RUNBOOK_BASE, other) for url in _urls(dashboard())]
    assert all(url.startswith(other) for url in _urls(board))
    assert _without_urls(board) == _without_urls(dashboard())


def test_the_operations_guide_substitutes_the_base_the_sources_hold_in_both_files() -> None:
    readme = (ALERTS.parents[2] / "docs" / "operations.md").read_text(encoding="utf-8")
    (command,) = re.findall(r"^sed -i 's\|([^|]+)\|[^|]+\|' \\\n\s+(.+)$", readme, re.MULTILINE)

    assert command[0] == RUNBOOK_BASE
    assert command[1].split() == [
        "deploy/prometheus/alerts.yml",
        "deploy/grafana/calendar-overview.json",
    ]


def _urls(node: Any) -> list[str]:
    """Every link's `url` in a JSON document, in order."""
    if isinstance(node, dict):
        own = [node["url"]] if isinstance(node.get("url"), str) else []
        return own + [u for key, value in node.items() if key != "url" for u in _urls(value)]
    if isinstance(node, list):
        return [u for item in node for u in _urls(item)]
    return []


def _without_urls(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: _without_urls(value) for key, value in node.items() if key != "url"}
    if isinstance(node, list):
        return [_without_urls(item) for item in node]
    return node


def test_promtool_rule_tests_show_each_alert_firing_and_not_firing() -> None:
    checks = []
    for tests in (ALERTS_TEST, ALERTS_TEST_DAYS):
        tested = promtool("test", "rules", tests.name, cwd=tests.parent)
        assert tested.returncode == 0, tested.output
        cases = yaml.safe_load(tests.read_text(encoding="utf-8"))["tests"]
        checks += [check for case in cases for check in case["alert_rule_test"]]
    for name in ALERT_NAMES:
        outcomes = [bool(c["exp_alerts"]) for c in checks if c["alertname"] == name]
        assert True in outcomes, f"no test shows {name} firing"
        assert False in outcomes, f"no test shows {name} not firing"


NO_SUCCESS, NOT_REPORTING = "SlotExpirationNoSuccessfulCycle", "SlotExpirationNotReporting"
BACKLOG, ITEMS, MISCONFIGURED, PAUSED, SINKS = (
    "SlotExpirationBacklogHigh",
    "SlotExpirationItemErrors",
    "SlotExpirationMisconfigured",
    "SlotExpirationPausedTooLong",
    "SlotExpirationSinkFailing",
)
WHILE_PAUSED = (
    "\n          unless on (namespace, job)\n"
    "          max by (namespace, job) (calendar_slot_expiration_paused) > 0"
)
LAST_SUCCESS = "namespace_job:calendar_slot_expiration_last_success_timestamp_seconds:max"
TARGETS = "namespace_job:calendar_slot_expiration_targets:count"
UP = 'up{job=~"(.+/)?slot-expiration"}'
# A weakened or broken rule must make the rule tests fail: they really discriminate. Each
# mutation names the alert whose tests must catch it (only those run: promtool is slow).
MUTATIONS = {
    # SlotExpirationNoSuccessfulCycle and the records it reads
    "no-success threshold of 2 hours": (NO_SUCCESS, "1800 * group by", "7200 * group by"),
    "no-success threshold below 30 minutes at a short interval": (
        NO_SUCCESS,
        "> 1800\n",
        "> 0\n",
    ),
    "no-success threshold blind to the interval": (
        NO_SUCCESS,
        "max by (namespace, job) (calendar_slot_expiration_interval_seconds)",
        "max by (namespace, job) (calendar_slot_expiration_no_such_gauge)",
    ),
    "no-success threshold of one interval": (NO_SUCCESS, "3 * namespace_job", "1 * namespace_job"),
    "no-success silent without the interval gauge": (
        NO_SUCCESS,
        f"1800 * group by (namespace, job) ({LAST_SUCCESS})",
        "1800 * group by (namespace, job) "
        "(namespace_job:calendar_slot_expiration_interval_seconds:max)",
    ),
    "no-success over live replicas only": (
        NO_SUCCESS,
        f"\n            or\n            last_over_time({LAST_SUCCESS}[1d])",
        "",
    ),
    "no-success forgets replicas gone for an hour": (
        NO_SUCCESS,
        f"last_over_time({LAST_SUCCESS}[1d])",
        "max_over_time(calendar_slot_expiration_last_success_timestamp_seconds[1h])",
    ),
    "no-success across deployments": (
        NO_SUCCESS,
        "max by (namespace, job) (\n            calendar_slot_expiration_last_success",
        "max by (job) (\n            calendar_slot_expiration_last_success",
    ),
    "no-success says a duration since 1970 for a deployment that never succeeded": (
        NO_SUCCESS,
        f"\n            or\n            {LAST_SUCCESS} == 0",
        "",
    ),
    "no-success fires while the deployment is paused": (
        NO_SUCCESS,
        f"{LAST_SUCCESS} == 0\n          ){WHILE_PAUSED}",
        f"{LAST_SUCCESS} == 0\n          )",
    ),
    "no-success stays silent once the pause ended": (
        NO_SUCCESS,
        f"{LAST_SUCCESS} == 0\n          ){WHILE_PAUSED}",
        f"{LAST_SUCCESS} == 0\n          )"
        + WHILE_PAUSED.replace(
            "(calendar_slot_expiration_paused)",
            "(max_over_time(calendar_slot_expiration_paused[2h]))",
        ),
    ),
    "no-success counts from 1970 for a deployment that never succeeded": (
        NO_SUCCESS,
        f"time() - ({LAST_SUCCESS} > 0)",
        f"time() - {LAST_SUCCESS}",
    ),
    # SlotExpirationNotReporting
    "not-reporting blind to targets down": (NOT_REPORTING, f"{UP} == 0", f"{UP} == 2"),
    "not-reporting blind to a target scraped without cycles": (
        NOT_REPORTING,
        "(calendar_slot_expiration_cycles_total) > 0",
        "(calendar_slot_expiration_cycles_total) >= 0",
    ),
    "not-reporting without the no-target branch": (
        NOT_REPORTING,
        "or\n          label_replace(absent(",
        "and\n          label_replace(absent(",
    ),
    "not-reporting on a brief restart": (NOT_REPORTING, "    for: 10m", "    for: 0m"),
    "not-reporting slower than 15 minutes": (NOT_REPORTING, "    for: 10m", "    for: 16m"),
    "not-reporting blind to a deployment whose targets vanished": (
        NOT_REPORTING,
        f"{TARGETS} == 0,",
        f"{TARGETS} == -1,",
    ),
    "not-reporting forgets a deployment once its targets vanish": (
        NOT_REPORTING,
        f"\n          or\n          0 * last_over_time({TARGETS}[1d])",
        "",
    ),
    "not-reporting says never scraped of a deployment it knew": (
        NOT_REPORTING,
        f"\n          unless on ()\n          {TARGETS}",
        "",
    ),
    "not-reporting across deployments": (
        NOT_REPORTING,
        "== 1)\n            unless on (namespace, job)",
        "== 1)\n            unless on ()",
    ),
    "not-reporting blind to the PodMonitor's job": (
        NOT_REPORTING,
        f"{UP} == 0",
        'up{job="slot-expiration"} == 0',
    ),
    # SlotExpirationBacklogHigh
    "backlog threshold of 10000": (
        BACKLOG,
        "(calendar_slot_expiration_backlog) > 5000",
        "(calendar_slot_expiration_backlog) > 10000",
    ),
    "backlog not sustained": (BACKLOG, "    for: 15m", "    for: 0m"),
    "backlog trend ignored": (
        BACKLOG,
        "(calendar_slot_expiration_backlog_change) >= 0",
        "(calendar_slot_expiration_backlog_change) >= -1e9",
    ),
    "backlog trend from the gauge over 30 minutes": (
        BACKLOG,
        "min by (namespace, job) (calendar_slot_expiration_backlog_change) >= 0",
        "delta(max by (namespace, job) (calendar_slot_expiration_backlog > 0)[30m:]) >= 0",
    ),
    "backlog trend from the replica that sees it worst": (
        BACKLOG,
        "min by (namespace, job) (calendar_slot_expiration_backlog_change)",
        "max by (namespace, job) (calendar_slot_expiration_backlog_change)",
    ),
    "backlog across deployments": (
        BACKLOG,
        "and on (namespace, job)\n"
        "            min by (namespace, job) (calendar_slot_expiration_backlog_change)",
        "and on ()\n            min(calendar_slot_expiration_backlog_change)",
    ),
    "backlog forgets a deployment whose replicas died": (
        BACKLOG,
        "max by (namespace, job) (last_over_time(calendar_slot_expiration_backlog[4d])) > 5000",
        "max by (namespace, job) (calendar_slot_expiration_backlog) > 5000",
    ),
    "backlog keeps firing beside the no-success alert": (
        BACKLOG,
        'ALERTS{alertname="SlotExpirationNoSuccessfulCycle", alertstate="firing"}',
        'ALERTS{alertname="SlotExpirationNoSuchAlert", alertstate="firing"}',
    ),
    "backlog holds a trend from before failures while the count comes down": (
        BACKLOG,
        "\n            unless on (namespace, job)\n            (\n"
        "              max by (namespace, job) (calendar_slot_expiration_backlog)\n"
        "              < on (namespace, job)\n"
        "              max by (namespace, job) (calendar_slot_expiration_backlog offset 30m)\n"
        "            )",
        "",
    ),
    "backlog fires while the deployment is paused": (
        BACKLOG,
        f'alertstate="firing"}}{WHILE_PAUSED}',
        'alertstate="firing"}',
    ),
    "backlog reads gone replicas beside live ones": (
        BACKLOG,
        "\n            unless on (namespace, job)\n"
        "            max by (namespace, job) (calendar_slot_expiration_backlog)\n",
        "\n",
    ),
    # SlotExpirationItemErrors
    "item errors on the count of slots in quarantine": (
        ITEMS,
        "max by (namespace, job) (calendar_slot_expiration_quarantine_oldest_age_seconds) > 3600",
        "max by (namespace, job) (calendar_slot_expiration_quarantined_slots) > 0",
    ),
    "item errors after two hours": (ITEMS, "_age_seconds) > 3600", "_age_seconds) > 7200"),
    "item errors at the first rejection": (ITEMS, "_age_seconds) > 3600", "_age_seconds) > 0"),
    "item errors across deployments": (
        ITEMS,
        "max by (namespace, job) (calendar_slot_expiration_quarantine_oldest_age_seconds)",
        "max(calendar_slot_expiration_quarantine_oldest_age_seconds)",
    ),
    # SlotExpirationMisconfigured
    "misconfigured too slow for 10 minutes": (MISCONFIGURED, "    for: 2m", "    for: 10m"),
    "misconfigured on transient failures": (
        MISCONFIGURED,
        "(calendar_slot_expiration_misconfigured) > 0",
        "(calendar_slot_expiration_misconfigured) >= 0",
    ),
    "misconfigured across deployments": (
        MISCONFIGURED,
        "max by (namespace, job) (calendar_slot_expiration_misconfigured)",
        "max(calendar_slot_expiration_misconfigured)",
    ),
    # SlotExpirationPausedTooLong
    "paused-too-long on the age alone": (
        PAUSED,
        "_pause_age_seconds - calendar_slot_expiration_pause_limit_seconds",
        "_pause_age_seconds - 0 * calendar_slot_expiration_pause_limit_seconds",
    ),
    "paused-too-long at its limit": (
        PAUSED,
        "_pause_limit_seconds\n          ) > 0",
        "_pause_limit_seconds\n          ) >= 0",
    ),
    "paused-too-long an hour late": (
        PAUSED,
        "_pause_limit_seconds\n          ) > 0",
        "_pause_limit_seconds\n          ) > 3600",
    ),
    "paused-too-long across deployments": (
        PAUSED,
        "max by (namespace, job) (\n            calendar_slot_expiration_pause_age_seconds",
        "max(\n            calendar_slot_expiration_pause_age_seconds",
    ),
    # SlotExpirationSinkFailing
    "sink failing at the first burst": (SINKS, "    for: 30m", "    for: 0m"),
    "sink failing never": (SINKS, "[15m])) > 0", "[15m])) > 1000"),
    "sink failing across deployments": (
        SINKS,
        "sum by (namespace, job) (increase(calendar_slot_expiration_sink_failures_total",
        "sum(increase(calendar_slot_expiration_sink_failures_total",
    ),
}


@pytest.mark.parametrize(("alert", "old", "new"), MUTATIONS.values(), ids=MUTATIONS.keys())
def test_the_rule_tests_fail_when_a_rule_is_weakened(
    tmp_path: Path, alert: str, old: str, new: str
) -> None:
    original = ALERTS.read_text(encoding="utf-8")
    assert original.count(old) == 1, f"mutation target {old!r} is not once in alerts.yml"
    (tmp_path / ALERTS.name).write_text(original.replace(old, new, 1), encoding="utf-8")
    document = yaml.safe_load(ALERTS_TEST.read_text(encoding="utf-8"))
    document["tests"] = [
        case
        for case in document["tests"]
        if any(check["alertname"] == alert for check in case["alert_rule_test"])
    ]
    (tmp_path / ALERTS_TEST.name).write_text(yaml.safe_dump(document), encoding="utf-8")
    assert promtool("check", "rules", str(tmp_path / ALERTS.name)).returncode == 0

    tested = promtool("test", "rules", ALERTS_TEST.name, cwd=tmp_path)

    assert tested.returncode != 0, tested.output
