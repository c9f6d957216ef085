"""Reading deploy/grafana/calendar-overview.json: its panels and their PromQL expressions."""

from __future__ import annotations

import json
from typing import Any

from tests.support.promtool import DASHBOARD


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def panels() -> list[dict[str, Any]]:
    """Every panel, those nested in collapsed rows included."""
    top = dashboard()["panels"]
    return [*top, *(child for panel in top for child in panel.get("panels", []))]


def expressions() -> list[str]:
    """Every PromQL expression of every panel, as Grafana holds it (with its variables)."""
    return [t["expr"] for p in panels() for t in p.get("targets", []) if "expr" in t]
