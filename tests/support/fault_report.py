"""The fault suite's figures: collected while the tests run, rendered into docs/reliability.md.

A fault test records what it saw (rows at risk, lost, done twice, time to
recover, measured with time.monotonic and never asserted) before it asserts
anything, so a failing run still reports honestly. When SLOT_EXPIRATION_FAULT_REPORT
names a file, the session writes the figures there as JSON; `render` then
fills the tables of the document between their markers:

    python -m tests.support.fault_report REPORT.json docs/reliability.md
"""

from __future__ import annotations

import json
import platform
import re
import sys
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPORT_VARIABLE = "SLOT_EXPIRATION_FAULT_REPORT"
FAULT_TABLE = "fault-table"
SUMMARY = "fault-summary"
OTHER_TESTS = "fault-other-tests"


@dataclass(frozen=True, slots=True)
class FaultFigures:
    fault: str
    injection: str
    rows_at_risk: int
    rows_lost: int
    rows_done_twice: int
    recovery_seconds: float | None  # None: nothing to recover from (no outage)
    note: str = ""


@dataclass
class FaultReport:
    faults: dict[str, dict[str, Any]] = field(default_factory=dict)
    measurements: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    environment: dict[str, str] = field(default_factory=dict)

    def record(self, test: str, figures: FaultFigures) -> None:
        self.faults[test] = asdict(figures)

    def measure(self, table: str, row: dict[str, Any]) -> None:
        """One row of a named table of measurements (columns: the row's keys)."""
        self.measurements.setdefault(table, []).append(row)

    def outcome(self, test: str, outcome: str) -> None:
        # setup, call and teardown each report; the worst of them stands
        if self.outcomes.get(test, "passed") == "passed":
            self.outcomes[test] = outcome

    def as_json(self, duration_seconds: float) -> dict[str, Any]:
        faults = [
            {"test": test, **figures, "outcome": self.outcomes.get(test, "unknown")}
            for test, figures in self.faults.items()
        ]
        return {
            "started_at": self.started_at.isoformat(timespec="seconds"),
            "duration_seconds": round(duration_seconds, 1),
            "python": platform.python_version(),
            "environment": self.environment,
            "tests": dict(sorted(self.outcomes.items())),
            "faults": faults,
            "measurements": self.measurements,
        }

    def write(self, path: Path, duration_seconds: float) -> None:
        path.write_text(json.dumps(self.as_json(duration_seconds), indent=2) + "\n")


# --- rendering -----------------------------------------------------------------------


def _recovery(row: dict[str, Any]) -> str:
    if row["recovery_seconds"] is not None:
        text = f"{row['recovery_seconds']:.2f} s"
    else:  # no outage to recover from, unless rows were lost: then it never recovered
        text = "not recovered" if row["rows_lost"] else "—"
    return f"{text} ({row['note']})" if row["note"] else text


def _cell(value: object) -> str:
    text = "—" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def fault_table(report: dict[str, Any]) -> str:
    lines = [
        "| fault | how it is injected | rows at risk | rows lost | rows done twice "
        "| time to recover | result | reproduce |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for row in report["faults"]:
        recover = _recovery(row)
        lines.append(
            "| "
            + " | ".join(
                [
                    _cell(row["fault"]),
                    _cell(row["injection"]),
                    str(row["rows_at_risk"]),
                    f"**{row['rows_lost']}**",
                    f"**{row['rows_done_twice']}**",
                    _cell(recover),
                    row["outcome"],
                    f"`{_cell(row['test'])}`",
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def summary(report: dict[str, Any]) -> str:
    faults = report["faults"]
    outcomes = list(report["tests"].values())
    env = ", ".join(f"{k} {v}" for k, v in report["environment"].items())
    return "\n".join(
        [
            f"Run of {report['started_at']}: {len(outcomes)} tests "
            f"({outcomes.count('passed')} passed, {outcomes.count('failed')} failed) "
            f"in {report['duration_seconds']:g} s; Python {report['python']}"
            + (f", {env}" if env else "")
            + ".",
            "",
            f"Rows at risk, summed over the faults: {sum(f['rows_at_risk'] for f in faults)}; "
            f"rows lost: **{sum(f['rows_lost'] for f in faults)}**; "
            f"rows done twice: **{sum(f['rows_done_twice'] for f in faults)}**.",
        ]
    )


def other_tests(report: dict[str, Any]) -> str:
    """The suite's tests that keep no row figures (the option fuzz, say), with their result."""
    recorded = {row["test"] for row in report["faults"]}
    return "\n".join(
        f"- `{test}`: {outcome}"
        for test, outcome in report["tests"].items()
        if test not in recorded
    )


def measurement_table(rows: list[dict[str, Any]]) -> str:
    columns = list(dict.fromkeys(key for row in rows for key in row))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def fill(document: str, block: str, content: str) -> str:
    """Replace what stands between `<!-- BEGIN block -->` and `<!-- END block -->`."""
    pattern = re.compile(
        rf"(<!-- BEGIN {re.escape(block)} -->\n).*?(<!-- END {re.escape(block)} -->)", re.S
    )
    if not pattern.search(document):
        raise SystemExit(f"markers of {block!r} not found in the document")
    return pattern.sub(lambda m: m.group(1) + content + "\n" + m.group(2), document, count=1)


def render(report: dict[str, Any], document: str) -> str:
    document = fill(document, SUMMARY, summary(report))
    document = fill(document, FAULT_TABLE, fault_table(report))
    document = fill(document, OTHER_TESTS, other_tests(report))
    for name, rows in report["measurements"].items():
        document = fill(document, f"measure:{name}", measurement_table(rows))
    return document


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: python -m tests.support.fault_report REPORT.json DOCUMENT.md")
    report = json.loads(Path(argv[0]).read_text())
    doc = Path(argv[1])
    doc.write_text(render(report, doc.read_text()))


if __name__ == "__main__":
    main(sys.argv[1:])
