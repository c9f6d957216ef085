"""deploy/grafana/calendar-overview.json: a "Background jobs" row whose every PromQL expression
parses (promtool, through a generated rule file) and names only metrics the worker exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from slot_expiration.telemetry.metrics import MetricsHooks, exported_metric_names
from tests.support.dashboard import dashboard, expressions
from tests.support.promtool import promtool

# Grafana's own variables, replaced by a value of their kind before PromQL sees them.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"' + r"|'(?:[^'\\]|\\.)*'")
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_CLAUSES = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w.:])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}


def as_promql(expression: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expression = expression.replace(variable, value)
    assert "$" not in expression, f"unknown variable in {expression!r}"
    return expression


def metric_names(expression: str) -> set[str]:
    """The metric names a PromQL expression reads (not functions, labels or keywords)."""
    text = _STRINGS.sub(" ", expression)
    for pattern in (_MATCHERS, _RANGES, _CLAUSES):
        text = pattern.sub(" ", text)
    return {name for name in _IDENTIFIER.findall(text) if name.lower() not in _KEYWORDS}


def test_metric_names_finds_the_metrics_and_nothing_else() -> None:
    expression = (
        'sum by (le) (rate(a_bucket{job="x", le!="+Inf"}[5m])) / on (job) group_left (le) '
        "b_total offset 5m and c > bool 1 or histogram_quantile(0.5, d)"
    )
    assert metric_names(expression) == {"a_bucket", "b_total", "c", "d"}


def test_the_dashboard_has_uid_calendar_overview_and_a_background_jobs_row() -> None:
    document = dashboard()
    rows = [p for p in document["panels"] if p["type"] == "row"]

    assert document["uid"] == "calendar-overview"
    assert [row["title"] for row in rows] == ["Background jobs"]


def test_every_panel_the_issue_lists_is_in_the_row() -> None:
    promql = expressions()

    def shown(*parts: str) -> bool:
        return any(all(part in expression for part in parts) for expression in promql)

    for quantile in ("0.5", "0.95", "0.99"):
        assert shown(f"histogram_quantile({quantile},", "cycle_duration_seconds_bucket")
    assert shown("rate(calendar_slot_expiration_items_total", "* 60")
    assert shown("calendar_slot_expiration_backlog")
    assert shown("rate(calendar_slot_expiration_skip_locked_total", "* 60")
    assert shown("calendar_slot_expiration_errors_total")
    assert shown("time() - ", "calendar_slot_expiration_last_success_timestamp_seconds")
    assert shown("by (outcome)", "calendar_slot_expiration_cycles_total")


def test_every_expression_parses_with_promtool(tmp_path: Path) -> None:
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard_expression_{i}", "expr": as_promql(expression)}
                    for i, expression in enumerate(expressions())
                ],
            }
        ]
    }
    rule_file = tmp_path / "dashboard-rules.yml"
    rule_file.write_text(json.dumps(rules), encoding="utf-8")  # JSON is YAML

    checked = promtool("check", "rules", str(rule_file))

    assert checked.returncode == 0, checked.output
    assert f"SUCCESS: {len(expressions())} rules found" in checked.output


@pytest.mark.parametrize("expression", expressions())
def test_every_expression_names_only_metrics_the_worker_exports(expression: str) -> None:
    exported = exported_metric_names(MetricsHooks().registry)
    named = metric_names(as_promql(expression))

    assert named, expression
    assert named <= exported, f"{named - exported} not exported by the worker"
