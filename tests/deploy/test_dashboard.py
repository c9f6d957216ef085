"""deploy/grafana/calendar-overview.json: a "Background jobs" row whose every PromQL expression
selects the dashboard's namespace, job and replica, parses (promtool, through a generated rule
file), names only metrics the worker exports, and reads right at the worker's 5-minute cadence
(promtool's expression tests on series that step once per cycle); its pause panel is red for
exactly the deployments the pause alert fires for."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from slot_expiration.telemetry.metrics import DURATION_BUCKETS, Metrics, exported_metric_names
from tests.support.dashboard import (
    GRAFANA_SCRAPE_SECONDS,
    TEMPLATE_VARIABLES,
    Query,
    dashboard,
    expressions,
    label_values_query,
    panels,
    queries,
    rate_interval,
    regex_value,
    substitute,
    variable,
)
from tests.support.promtool import ALERTS, RUNBOOK_BASE, promtool, runbook_anchors

pytestmark = pytest.mark.deploy

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"' + r"|'(?:[^'\\]|\\.)*'")
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_CLAUSES = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w.:])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()")
_SELECTORS = re.compile(r"(?<![\w:])([A-Za-z_:][\w:]*)\s*(\{[^}]*\})?(?!\s*\()")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
ALL = dict.fromkeys(TEMPLATE_VARIABLES, ".*")
CYCLE_SECONDS = 300
SELECTED = {"namespace": "calendar", "job": "slot-expiration", "instance": "127.0.0.1:9464"}
SELECTED_LABELS = 'namespace="calendar",job="slot-expiration",instance="127.0.0.1:9464"'


def as_promql(expression: str) -> str:
    """With every variable at All and Grafana's intervals at values of their kind."""
    return substitute(expression, ALL, rate_interval_seconds=300, range_seconds=3600)


def metric_names(expression: str) -> set[str]:
    """The metric names a PromQL expression reads (not functions, labels or keywords)."""
    text = _STRINGS.sub(" ", expression)
    for pattern in (_MATCHERS, _RANGES, _CLAUSES):
        text = pattern.sub(" ", text)
    return {name for name in _IDENTIFIER.findall(text) if name.lower() not in _KEYWORDS}


def selectors(expression: str) -> dict[str, str]:
    """Each metric the expression reads, with its matchers (`{...}`, or "" when it has none)."""
    names = metric_names(expression)
    text = _CLAUSES.sub(" ", expression)
    found = {name: matchers or "" for name, matchers in _SELECTORS.findall(text) if name in names}
    assert set(found) == names, expression
    return found


def test_metric_names_finds_the_metrics_and_nothing_else() -> None:
    expression = (
        'sum by (le) (rate(a_bucket{job="x", le!="+Inf"}[5m])) / on (job) group_left (le) '
        "b_total offset 5m and c > bool 1 or histogram_quantile(0.5, d)"
    )
    assert metric_names(expression) == {"a_bucket", "b_total", "c", "d"}
    assert selectors(expression) == {
        "a_bucket": '{job="x", le!="+Inf"}',
        "b_total": "",
        "c": "",
        "d": "",
    }


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
    assert shown("calendar_slot_expiration_quarantined_slots")
    assert shown("calendar_slot_expiration_paused", "calendar_slot_expiration_pause_age_seconds")
    assert shown(
        "clamp_min(max by (namespace, job) (calendar_slot_expiration_pause_age_seconds",
        "- calendar_slot_expiration_pause_limit_seconds",
    )
    assert shown(
        "sum by (namespace, job, reason) (rate(calendar_slot_expiration_throttled_seconds_total",
        "* 60",
    )
    assert shown("max by (namespace, job) (calendar_slot_expiration_replica_lag_seconds")


def test_every_panel_has_its_own_id_and_place_inside_the_24_columns() -> None:
    """No two panels share an id (Grafana's links to a panel name it) or overlap (Grafana
    would push one down, out of the order the panels are written in)."""
    placed = [(p["id"], p["title"], p["gridPos"]) for p in panels()]
    ids = [id_ for id_, _, _ in placed]

    assert len(ids) == len(set(ids)), ids
    for _, title, grid in placed:
        assert min(grid["x"], grid["y"]) >= 0, title
        assert min(grid["w"], grid["h"]) > 0, title
        assert grid["x"] + grid["w"] <= 24, title
    for i, (_, title, a) in enumerate(placed):
        for _, other, b in placed[i + 1 :]:
            apart = (
                a["x"] + a["w"] <= b["x"]
                or b["x"] + b["w"] <= a["x"]
                or a["y"] + a["h"] <= b["y"]
                or b["y"] + b["h"] <= a["y"]
            )
            assert apart, (title, other)


def test_variables_choose_the_data_source_then_namespace_job_and_replica_each_within_the_last() -> (
    None
):
    names = [v["name"] for v in dashboard()["templating"]["list"]]

    assert names == ["datasource", *TEMPLATE_VARIABLES]
    assert variable("datasource")["query"] == "prometheus"
    for before, name in enumerate(TEMPLATE_VARIABLES):
        chosen = variable(name)
        selector, label = label_values_query(name)
        assert label == name
        assert selector.startswith("calendar_slot_expiration_build_info")
        for earlier in TEMPLATE_VARIABLES[:before]:
            assert f'{earlier}=~"${earlier}"' in selector
        assert chosen["datasource"]["uid"] == "${datasource}"
        assert chosen["multi"]
        assert chosen["includeAll"]
        # All is a regex that also matches a series without the label (no namespace outside
        # Kubernetes), not the list of the values found.
        assert chosen["allValue"] == ".*"


@pytest.mark.parametrize("expression", expressions())
def test_every_metric_an_expression_reads_is_selected_by_namespace_job_and_replica(
    expression: str,
) -> None:
    for name, matchers in selectors(expression).items():
        for variable_name in TEMPLATE_VARIABLES:
            assert f'{variable_name}=~"${variable_name}"' in matchers, (name, expression)


def test_every_panel_queries_the_chosen_data_source() -> None:
    for panel in panels():
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]


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


def _exported() -> set[str]:
    """Every series name the worker exports, a labelled counter's too before its first
    series (the sink failures: each sink's series is created as `run` wires it)."""
    registry = Metrics().registry
    return exported_metric_names(registry) | {
        f"{family.name}_total"
        for family in registry.collect()
        if family.type == "counter" and not family.samples
    }


@pytest.mark.parametrize("expression", expressions())
def test_every_expression_names_only_metrics_the_worker_exports(expression: str) -> None:
    exported = _exported()
    named = metric_names(as_promql(expression))

    assert named, expression
    assert named <= exported, f"{named - exported} not exported by the worker"


# Exported but drawn on no panel, each for a reason: the histogram's sum and count (its
# buckets give the quantiles), and the process collector's standard series, of which the
# replicas table shows resident memory.
_NOT_DRAWN = {
    "calendar_slot_expiration_cycle_duration_seconds_count",
    "calendar_slot_expiration_cycle_duration_seconds_sum",
    "process_cpu_seconds_total",
    "process_max_fds",
    "process_open_fds",
    "process_start_time_seconds",
    "process_virtual_memory_bytes",
}


def test_every_metric_the_worker_exports_is_drawn_on_a_panel() -> None:
    """What the worker measures reaches the on-call view; a new metric without a panel fails
    here (or is added to _NOT_DRAWN, with why)."""
    exported = _exported()
    drawn = {name for expression in expressions() for name in metric_names(as_promql(expression))}

    assert exported >= _NOT_DRAWN  # each exemption still names an exported series
    assert exported - _NOT_DRAWN - drawn == set()


def test_a_chosen_replica_is_written_as_grafana_escapes_it_for_prometheus() -> None:
    assert regex_value([]) == ".*"
    assert regex_value(["127.0.0.1:9464"]) == r"127\\.0\\.0\\.1:9464"
    assert regex_value(["a", "b"]) == "(a|b)"


# -- the 5-minute cadence ----------------------------------------------------------------


def _windowed() -> list[Query]:
    return [q for q in queries() if "$__rate_interval" in q.expr]


@pytest.mark.parametrize("query", _windowed(), ids=lambda q: q.panel["title"])
def test_every_rate_and_quantile_reads_at_least_two_cycles(query: Query) -> None:
    """A panel's minimum interval keeps `$__rate_interval` at two cycles or more, however far
    the dashboard is zoomed in."""
    assert query.min_interval_seconds >= 2 * CYCLE_SECONDS, query.panel["title"]


def _cycle_series(scrape_seconds: int, minutes: int) -> list[dict[str, str]]:
    """One replica's counters, scraped every `scrape_seconds`: a cycle every 5 minutes (each
    ends 100 s past a 5-minute mark, so no evaluation below falls on one), 500 slots expired and
    a duration of 40 ms observed by each."""
    times = range(0, minutes * 60 + 1, scrape_seconds)
    cycles = [(t + CYCLE_SECONDS - 100) // CYCLE_SECONDS for t in times]

    def series(name: str, per_cycle: float, extra: str = "") -> dict[str, str]:
        values = " ".join(f"{per_cycle * n:g}" for n in cycles)
        return {
            "series": f"calendar_slot_expiration_{name}{{{SELECTED_LABELS}{extra}}}",
            "values": values,
        }

    buckets = [*(f"{le}" for le in DURATION_BUCKETS), "+Inf"]
    return [
        series("items_total", 500),
        series("cycles_total", 1, ',outcome="success"'),
        # Each cycle's drain rests 50 s in all after its batches (a nice ratio).
        series("throttled_seconds_total", 50, ',reason="nice"'),
        *(
            series(
                "cycle_duration_seconds_bucket",
                0 if le != "+Inf" and float(le) < 0.04 else 1,
                f',le="{le}"',
            )
            for le in buckets
        ),
    ]


def _observed(le: str, seconds: float) -> int:
    """1 when a bucket counts an observation of `seconds`, else 0."""
    return 1 if le == "+Inf" or seconds <= float(le) else 0


# Per panel: how its value reads right at a cycle every 5 minutes, and the labels of its one
# series. A window of a bit more than two cycles holds two steps of the counters, or three for
# as long as it is longer than two cycles (15 or 30 s of each 5 minutes): expired per minute
# reads 95-98, or 143-146 then; never 0, never 500 (throttled seconds per minute a tenth of
# that: about 10, never 0, never 50). Quantiles: a number, never NaN.
_READS_RIGHT = {
    "rate(calendar_slot_expiration_items_total": ("(({e}) > bool 50) * (({e}) < bool 150)", "{}"),
    "rate(calendar_slot_expiration_throttled_seconds_total": (
        "(({e}) > bool 5) * (({e}) < bool 15)",
        '{namespace="calendar",job="slot-expiration",reason="nice"}',
    ),
    "rate(calendar_slot_expiration_cycles_total": (
        "(({e}) > bool 6) * (({e}) < bool 18)",
        '{outcome="success"}',
    ),
    "histogram_quantile(": ("({e}) >= bool 0", "{}"),
}


def _cadence_cases() -> list[tuple[Query, str, str]]:
    cases = []
    for query in _windowed():
        for marker, (check, labels) in _READS_RIGHT.items():
            if marker in query.expr:
                cases.append((query, check, labels))
    return cases


def _promtool_cadence_test(
    tmp_path: Path, case: tuple[Query, str, str], scrape_seconds: int, window_seconds: float
) -> Any:
    query, check, labels = case
    chosen = {name: regex_value([value]) for name, value in SELECTED.items()}
    expression = substitute(
        query.expr, chosen, rate_interval_seconds=window_seconds, range_seconds=3600
    )
    test = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": f"{scrape_seconds}s",
                "input_series": _cycle_series(scrape_seconds, 40),
                "promql_expr_test": [
                    {
                        "expr": check.format(e=expression),
                        "eval_time": f"{second}s",
                        "exp_samples": [{"labels": labels, "value": 1}],
                    }
                    # Every 15 s of one cycle.
                    for second in range(30 * 60, 35 * 60, 15)
                ],
            }
        ],
    }
    (tmp_path / "cadence_test.yml").write_text(json.dumps(test), encoding="utf-8")
    return promtool("test", "rules", "cadence_test.yml", cwd=tmp_path)


@pytest.mark.parametrize("scrape_seconds", [GRAFANA_SCRAPE_SECONDS, 30])
@pytest.mark.parametrize(
    "case", _cadence_cases(), ids=lambda c: c[0].expr.split("{")[0].split("(")[-1]
)
def test_at_one_cycle_every_5_minutes_rates_read_the_true_rate_and_quantiles_a_number(
    tmp_path: Path, case: tuple[Query, str, str], scrape_seconds: int
) -> None:
    """Expired per minute reads about 100 (500 per 5 minutes), cycles per hour about 12, each
    quantile a duration, at every moment of a cycle: not 0 four minutes in five and 500 on the
    fifth, nor NaN between cycles. The window is the smallest Grafana uses: `$__rate_interval`
    at the panel's minimum interval (zoomed out, it only grows)."""
    window = rate_interval(case[0], scrape_seconds)

    tested = _promtool_cadence_test(tmp_path, case, scrape_seconds, window)

    assert tested.returncode == 0, tested.output


@pytest.mark.parametrize(
    "case", _cadence_cases(), ids=lambda c: c[0].expr.split("{")[0].split("(")[-1]
)
def test_without_the_minimum_interval_the_same_checks_fail(
    tmp_path: Path, case: tuple[Query, str, str]
) -> None:
    """The cadence test discriminates: at Grafana's default `$__rate_interval` (4 scrapes), the
    rates read 0 between cycles and the quantiles NaN."""
    bare = Query({**case[0].panel, "interval": "0s"}, case[0].expr)

    tested = _promtool_cadence_test(
        tmp_path, case, GRAFANA_SCRAPE_SECONDS, rate_interval(bare, GRAFANA_SCRAPE_SECONDS)
    )

    assert tested.returncode != 0, tested.output


# -- what an on-call engineer reads -------------------------------------------------------


def _panel(title_part: str) -> dict[str, Any]:
    (found,) = [p for p in panels() if title_part in p["title"]]
    return found


def _field_config(panel: dict[str, Any], ref_id: str) -> dict[str, Any]:
    """The field config of what one query of a panel returns: the defaults, then the
    properties of each override that matches the query (each replaces the default's value)."""
    config = dict(panel["fieldConfig"]["defaults"])
    for override in panel["fieldConfig"]["overrides"]:
        if override["matcher"] == {"id": "byFrameRefID", "options": ref_id}:
            config.update({p["id"]: p["value"] for p in override["properties"]})
    return config


def _shown(config: dict[str, Any], value: float) -> tuple[str | None, str]:
    """The text (None: the value itself) and colour a stat shows for a value: the first value
    mapping that holds it, else the colour of the highest threshold step at or below it."""
    key = f"{value:g}"  # as JavaScript's String(value) writes an integer
    for mapping in config["mappings"]:
        if mapping["type"] == "value" and key in mapping["options"]:
            result = mapping["options"][key]
            return result["text"], result["color"]
    steps = config["thresholds"]["steps"]
    reached = [s for s in steps if s["value"] is None or value >= s["value"]]
    return None, reached[-1]["color"]


@pytest.mark.parametrize(
    "title",
    [
        "seconds since last success",
        "slots in quarantine",
        "paused",
        "backlog counted up to its cap",
        "oldest slot in quarantine",
        "tick interval",
    ],
)
def test_current_values_are_read_now_and_say_so_in_red_when_no_replica_reports(
    title: str,
) -> None:
    """An instant query: a stopped worker's series go stale (Prometheus marks them when a
    scrape fails or the target goes away), so the panel shows no data, in red, and never the
    last value of the range frozen in green."""
    panel = _panel(title)

    assert panel["fieldConfig"]["defaults"]["noValue"]
    for target in panel["targets"]:
        config = _field_config(panel, target["refId"])
        assert target["instant"] is True
        assert target["range"] is False
        assert "_over_time(" not in target["expr"]
        (nothing,) = [m for m in config["mappings"] if m["type"] == "special"]
        assert nothing["options"]["match"] == "null"
        assert nothing["options"]["result"]["color"] == "red"


def test_seconds_since_last_success_goes_red_at_the_alerts_30_minutes() -> None:
    defaults = _panel("seconds since last success")["fieldConfig"]["defaults"]

    steps = {step["color"]: step["value"] for step in defaults["thresholds"]["steps"]}
    assert steps["green"] is None
    assert steps["red"] == 1800
    assert defaults["unit"] == "s"


def test_a_table_shows_each_replica_last_success_backlog_cycles_and_resident_memory() -> None:
    table = _panel("replicas")
    columns = {t["refId"]: t["expr"] for t in table["targets"]}
    renamed = table["transformations"][1]["options"]["renameByName"]
    shown = {
        renamed[f"Value #{ref}"]: expr
        for ref, expr in columns.items()
        if f"Value #{ref}" in renamed
    }

    assert table["type"] == "table"
    assert all(t["format"] == "table" and t["instant"] for t in table["targets"])
    assert all("by (instance" in expr for expr in columns.values())
    assert "calendar_slot_expiration_last_success_timestamp_seconds" in shown["since last success"]
    assert "calendar_slot_expiration_backlog" in shown["backlog"]
    assert "calendar_slot_expiration_cycles_total" in shown["cycles ok (range)"]
    assert "process_resident_memory_bytes" in shown["resident memory"]


def test_the_dashboard_links_the_runbook_and_its_sections_under_the_runbook_base() -> None:
    (link,) = dashboard()["links"]
    section_links = [link for p in panels() for link in p.get("links", [])]

    assert link["url"] == RUNBOOK_BASE
    assert section_links
    for section in section_links:
        base, _, anchor = section["url"].partition("#")
        assert base == RUNBOOK_BASE
        assert anchor in runbook_anchors()


def test_seconds_since_last_success_tells_replicas_without_a_success_from_no_replica(
    tmp_path: Path,
) -> None:
    """A deployment whose replicas report but none has completed a cycle since it started
    reads -1, shown as "no success since start" in red; one whose replicas report nothing is
    no value ("no replica reports"); one that succeeded reads the seconds since."""
    panel = _panel("seconds since last success")
    (target,) = panel["targets"]
    expression = substitute(target["expr"], ALL, rate_interval_seconds=300, range_seconds=3600)
    name = "calendar_slot_expiration_last_success_timestamp_seconds"
    test = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "30s",
                "input_series": [
                    # calendar: both replicas restarted, neither has completed a cycle yet.
                    {
                        "series": f'{name}{{namespace="calendar",job="se",instance="a"}}',
                        "values": "0x20",
                    },
                    {
                        "series": f'{name}{{namespace="calendar",job="se",instance="b"}}',
                        "values": "0x20",
                    },
                    # staging: one replica succeeded at 60 s, another has not yet.
                    {
                        "series": f'{name}{{namespace="staging",job="se",instance="c"}}',
                        "values": "60x20",
                    },
                    {
                        "series": f'{name}{{namespace="staging",job="se",instance="d"}}',
                        "values": "0x20",
                    },
                ],
                "promql_expr_test": [
                    {
                        "expr": expression,
                        "eval_time": "5m",
                        "exp_samples": [
                            {"labels": '{namespace="calendar",job="se"}', "value": -1},
                            {"labels": '{namespace="staging",job="se"}', "value": 240},
                        ],
                    }
                ],
            }
        ],
    }
    (tmp_path / "since_test.yml").write_text(json.dumps(test), encoding="utf-8")
    defaults = panel["fieldConfig"]["defaults"]
    values = [m for m in defaults["mappings"] if m["type"] == "value"]

    tested = promtool("test", "rules", "since_test.yml", cwd=tmp_path)

    assert tested.returncode == 0, tested.output
    (mapping,) = values
    assert mapping["options"]["-1"]["text"] == "no success since start"
    assert mapping["options"]["-1"]["color"] == "red"
    assert defaults["noValue"] == "no replica reports"


# Per deployment (job): each replica's (paused, pause age, pause limit) as its last cycle read
# them; what the pause panel reads ("paused for", "past its limit"); whether
# SlotExpirationPausedTooLong fires.
_PAUSES = {
    "running": ([(0, 0, 0), (0, 0, 0)], -1, 0, False),
    # `pause --for 30m`, 20 minutes ago; the second replica read it at its tick before.
    "within-its-end": ([(1, 1200, 1800), (1, 1150, 1800)], 1200, 0, False),
    "at-its-end": ([(1, 1800, 1800)], 1800, 0, False),
    "past-its-end": ([(1, 2100, 1800), (1, 2050, 1800)], 2100, 300, True),
    # `pause` with no end: 4 hours.
    "no-end-past-4-hours": ([(1, 14700, 14400)], 14700, 300, True),
    "no-end-within-4-hours": ([(1, 7200, 14400)], 7200, 0, False),
    # The pause began as one replica read it; the other has not ticked since.
    "read-by-one-replica": ([(1, 0, 1800), (0, 0, 0)], 0, 0, False),
}


def test_the_pause_panel_says_how_long_each_deployment_is_paused_red_as_the_alert_fires(
    tmp_path: Path,
) -> None:
    """promtool evaluates the panel's two queries and the shipped alert rules on the same
    series: "paused for" reads the age of the pause in force ("not paused", in green, when no
    replica's last cycle found one; orange while it holds, even 0 s old), "past its limit" how
    long it has outlived its end or 4 hours ("no" until then), and is red for exactly the
    deployments SlotExpirationPausedTooLong fires for."""
    panel = _panel("paused")
    targets = {t["refId"]: t for t in panel["targets"]}
    names = ("paused", "pause_age_seconds", "pause_limit_seconds")
    series = [
        {
            "series": f'calendar_slot_expiration_{name}{{namespace="calendar",job="{job}",'
            f'instance="{replica}"}}',
            "values": f"{value}x10",
        }
        for job, (replicas, _, _, _) in _PAUSES.items()
        for replica, read in enumerate(replicas)
        for name, value in zip(names, read, strict=True)
    ]

    def read(ref_id: str, column: int) -> dict[str, Any]:
        expression = substitute(
            targets[ref_id]["expr"], ALL, rate_interval_seconds=300, range_seconds=3600
        )
        return {
            "expr": expression,
            "eval_time": "5m",
            "exp_samples": [
                {"labels": f'{{namespace="calendar",job="{job}"}}', "value": case[column]}
                for job, case in _PAUSES.items()
            ],
        }

    firing = [job for job, case in _PAUSES.items() if case[3]]
    test = {
        "rule_files": [str(ALERTS)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    read("A", 1),
                    read("B", 2),
                    {
                        "expr": 'ALERTS{alertname="SlotExpirationPausedTooLong"}',
                        "eval_time": "5m",
                        "exp_samples": [
                            {
                                "labels": 'ALERTS{alertname="SlotExpirationPausedTooLong",'
                                f'alertstate="firing",namespace="calendar",job="{job}",'
                                'severity="warning"}',
                                "value": 1,
                            }
                            for job in firing
                        ],
                    },
                ],
            }
        ],
    }
    (tmp_path / "pause_test.yml").write_text(json.dumps(test), encoding="utf-8")

    tested = promtool("test", "rules", "pause_test.yml", cwd=tmp_path)

    assert tested.returncode == 0, tested.output
    paused_for, past_its_limit = _field_config(panel, "A"), _field_config(panel, "B")
    assert paused_for["unit"] == past_its_limit["unit"] == "s"
    for job, (_, age, past, fires) in _PAUSES.items():
        expected = ("not paused", "green") if age == -1 else (None, "orange")
        assert _shown(paused_for, age) == expected, job
        assert _shown(past_its_limit, past) == ((None, "red") if fires else ("no", "green")), job
    assert [link["url"].partition("#")[2] for link in panel["links"]] == ["the-worker-is-paused"]
