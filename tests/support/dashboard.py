"""Reading deploy/grafana/calendar-overview.json: its panels, their PromQL expressions, and the
expressions as Grafana sends them to Prometheus once its variables are replaced."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.support.promtool import DASHBOARD

# The dashboard's own variables, each chosen from the one before it.
TEMPLATE_VARIABLES = ("namespace", "job", "instance")
# Grafana's Prometheus data source assumes this scrape interval unless told another.
GRAFANA_SCRAPE_SECONDS = 15
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*(?P<label>\w+)\)$")
# What Grafana escapes in a regex variable's values for Prometheus (prometheusSpecialRegexEscape).
_REGEX_SPECIAL = re.compile(r"[$^*{}\[\]'+?.()|]")


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def panels() -> list[dict[str, Any]]:
    """Every panel, those nested in collapsed rows included."""
    top = dashboard()["panels"]
    return [*top, *(child for panel in top for child in panel.get("panels", []))]


def expressions() -> list[str]:
    """Every PromQL expression of every panel, as Grafana holds it (with its variables)."""
    return [query.expr for query in queries()]


@dataclass(frozen=True, slots=True)
class Query:
    panel: dict[str, Any]
    expr: str

    @property
    def min_interval_seconds(self) -> float:
        """The panel's minimum interval ("Min interval"), 0 when it has none."""
        return seconds(self.panel.get("interval", "0s"))


def queries() -> list[Query]:
    return [Query(p, t["expr"]) for p in panels() for t in p.get("targets", []) if "expr" in t]


def variables() -> list[dict[str, Any]]:
    variables: list[dict[str, Any]] = dashboard()["templating"]["list"]
    return variables


def variable(name: str) -> dict[str, Any]:
    (found,) = [v for v in variables() if v["name"] == name]
    return found


def label_values_query(name: str) -> tuple[str, str]:
    """(series selector, label) of a variable's `label_values(selector, label)` query."""
    parsed = _LABEL_VALUES.match(variable(name)["query"])
    assert parsed is not None, variable(name)["query"]
    return parsed.group("selector"), parsed.group("label")


def seconds(duration: str) -> float:
    """A Prometheus/Grafana duration ("10m", "1h30m") in seconds."""
    parts = _DURATION.findall(duration)
    assert parts, duration
    assert "".join(n + u for n, u in parts) == duration, duration
    return sum(int(n) * _UNIT_SECONDS[u] for n, u in parts)


def duration(value: float) -> str:
    """Seconds as a PromQL duration of whole seconds."""
    return f"{round(value)}s"


def rate_interval(query: Query, scrape_seconds: float, step_seconds: float = 0) -> float:
    """Grafana's `$__rate_interval`: max($__interval + scrape interval, 4 x scrape interval),
    $__interval being the query's step, never below the panel's minimum interval."""
    interval = max(step_seconds, query.min_interval_seconds)
    return max(interval + scrape_seconds, 4 * scrape_seconds)


def regex_value(values: Sequence[str]) -> str:
    """A multi-value variable as Grafana writes it into a Prometheus regex matcher: `.*` (the
    variables' allValue) for All or none, the escaped value, or `(a|b)` for several."""
    if not values:
        return str(variable(TEMPLATE_VARIABLES[0])["allValue"])
    escaped = [_REGEX_SPECIAL.sub(lambda m: "\\\\" + m.group(0), v) for v in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def substitute(
    expression: str,
    chosen: Mapping[str, str],
    *,
    rate_interval_seconds: float,
    range_seconds: float,
) -> str:
    """The expression as Grafana sends it: template variables (`chosen`, already formatted with
    regex_value) and Grafana's own interval variables replaced."""
    text = expression.replace("$__rate_interval", duration(rate_interval_seconds))
    text = text.replace("$__range", duration(range_seconds))
    for name in TEMPLATE_VARIABLES:
        text = text.replace("${" + name + "}", chosen[name]).replace("$" + name, chosen[name])
    assert "$" not in text, f"unknown variable in {text!r}"
    return text
