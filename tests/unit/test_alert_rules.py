"""deploy/prometheus/alerts.yml: valid, named as the issue says, and shown firing and not firing
by `promtool test rules` (deploy/prometheus/alerts_test.yml)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.dashboard import dashboard
from tests.support.promtool import (
    ALERTS,
    ALERTS_TEST,
    DASHBOARD,
    RUNBOOK_BASE,
    promtool,
    runbook_anchors,
)

ALERT_NAMES = (
    "SlotExpirationNoSuccessfulCycle",
    "SlotExpirationBacklogHigh",
    "SlotExpirationItemErrors",
    "SlotExpirationMisconfigured",
)


def _rules() -> dict[str, dict[str, Any]]:
    document = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return {rule["alert"]: rule for group in document["groups"] for rule in group["rules"]}


def test_promtool_accepts_the_rule_file() -> None:
    checked = promtool("check", "rules", str(ALERTS))

    assert checked.returncode == 0, checked.output
    assert "SUCCESS: 4 rules found" in checked.output


def test_the_alerts_are_named_exactly_as_the_issues_give_them() -> None:
    assert tuple(_rules()) == ALERT_NAMES


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
        assert "{{ $labels.namespace }}/{{ $labels.job }}" in rule["annotations"][annotation]


def test_one_substitution_of_the_runbook_base_moves_every_runbook_link_and_nothing_else() -> None:
    """docs/operations.md, "Alerts": replacing the base's text in alerts.yml and the dashboard
    is enough."""
    other = "https://git.example.org/calendar/slot-expiration/-/blob/main/docs/runbooks/x.md"
    alerts = yaml.safe_load(ALERTS.read_text(encoding="utf-8").replace(RUNBOOK_BASE, other))
    board = json.loads(DASHBOARD.read_text(encoding="utf-8").replace(RUNBOOK_BASE, other))
    moved = {rule["alert"]: rule for group in alerts["groups"] for rule in group["rules"]}

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
    tested = promtool("test", "rules", ALERTS_TEST.name, cwd=ALERTS_TEST.parent)

    assert tested.returncode == 0, tested.output
    cases = yaml.safe_load(ALERTS_TEST.read_text(encoding="utf-8"))["tests"]
    checks = [check for case in cases for check in case["alert_rule_test"]]
    for name in ALERT_NAMES:
        outcomes = [bool(c["exp_alerts"]) for c in checks if c["alertname"] == name]
        assert True in outcomes, f"no test shows {name} firing"
        assert False in outcomes, f"no test shows {name} not firing"


# A weakened or broken rule must make the rule tests fail: they really discriminate.
MUTATIONS = {
    # SlotExpirationNoSuccessfulCycle
    "no-success threshold of 2 hours": ("1800 * group by", "7200 * group by"),
    "no-success threshold below 30 minutes at a short interval": ("> 1800\n", "> 0\n"),
    "no-success threshold blind to the interval": (
        "calendar_slot_expiration_interval_seconds[1d]",
        "calendar_slot_expiration_no_such_gauge[1d]",
    ),
    "no-success threshold of one interval": ("3 * max by", "1 * max by"),
    "no-success silent without the interval gauge": (
        "1800 * group by (namespace, job) "
        "(last_over_time(calendar_slot_expiration_last_success_timestamp_seconds[1d]))",
        "1800 * group by (namespace, job) "
        "(last_over_time(calendar_slot_expiration_interval_seconds[1d]))",
    ),
    "no-success without the no-replica branch": (
        "\n          or\n          absent_over_time(",
        "\n          and\n          absent_over_time(",
    ),
    "no-success over live replicas only": (
        "max_over_time(calendar_slot_expiration_last_success_timestamp_seconds[1d])",
        "calendar_slot_expiration_last_success_timestamp_seconds",
    ),
    "no-success forgets replicas gone for an hour": (
        "max_over_time(calendar_slot_expiration_last_success_timestamp_seconds[1d])",
        "max_over_time(calendar_slot_expiration_last_success_timestamp_seconds[1h])",
    ),
    "no-success across deployments": (
        "time() - max by (namespace, job) (max_over_time(",
        "time() - max by (job) (max_over_time(",
    ),
    # SlotExpirationBacklogHigh
    "backlog threshold of 10000": ("> 5000", "> 10000"),
    "backlog not sustained": ("    for: 15m", "    for: 0m"),
    "backlog trend ignored": ("[30m:]) >= 0", "[30m:]) >= -1e9"),
    "backlog trend over one cycle": ("[30m:]", "[5m:]"),
    "backlog trend per replica": (
        "delta(max by (namespace, job) (calendar_slot_expiration_backlog > 0)[30m:])",
        "max by (namespace, job) (delta(calendar_slot_expiration_backlog[30m]))",
    ),
    "backlog trend counts the zeros before a first cycle": (
        "(calendar_slot_expiration_backlog > 0)[30m:]",
        "(calendar_slot_expiration_backlog)[30m:]",
    ),
    "backlog trend across deployments": (
        "and on (namespace, job)\n"
        "          delta(max by (namespace, job) (calendar_slot_expiration_backlog > 0)",
        "and on ()\n          delta(max(calendar_slot_expiration_backlog > 0)",
    ),
    # SlotExpirationItemErrors
    "item errors on the attempts counter": (
        "max by (namespace, job) (calendar_slot_expiration_quarantined_slots) > 0",
        "sum by (namespace, job) (rate(calendar_slot_expiration_errors_total[75m])) > 0",
    ),
    "item errors only from two slots on": (
        "(calendar_slot_expiration_quarantined_slots) > 0",
        "(calendar_slot_expiration_quarantined_slots) > 1",
    ),
    "item errors not sustained": ("    for: 1h", "    for: 10m"),
    # SlotExpirationMisconfigured
    "misconfigured too slow for 10 minutes": ("    for: 2m", "    for: 10m"),
    "misconfigured on transient failures": (
        "(calendar_slot_expiration_misconfigured) > 0",
        "(calendar_slot_expiration_misconfigured) >= 0",
    ),
    "misconfigured across deployments": (
        "max by (namespace, job) (calendar_slot_expiration_misconfigured)",
        "max(calendar_slot_expiration_misconfigured)",
    ),
}


@pytest.mark.parametrize(("old", "new"), MUTATIONS.values(), ids=MUTATIONS.keys())
def test_the_rule_tests_fail_when_a_rule_is_weakened(tmp_path: Path, old: str, new: str) -> None:
    original = ALERTS.read_text(encoding="utf-8")
    assert original.count(old) == 1, f"mutation target {old!r} is not once in alerts.yml"
    (tmp_path / ALERTS.name).write_text(original.replace(old, new, 1), encoding="utf-8")
    shutil.copy(ALERTS_TEST, tmp_path / ALERTS_TEST.name)
    assert promtool("check", "rules", str(tmp_path / ALERTS.name)).returncode == 0

    tested = promtool("test", "rules", ALERTS_TEST.name, cwd=tmp_path)

    assert tested.returncode != 0, tested.output
