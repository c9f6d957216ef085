"""The PrometheusRule of the Kubernetes base, generated from deploy/prometheus/alerts.yml (the
one source of the alert rules: kustomize cannot put a file's content into a custom resource's
spec). After changing the alerts, regenerate it:

    .venv/bin/python -m tests.deploy.prometheus_rule

tests/deploy/test_kubernetes.py fails while the two differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPOSITORY = Path(__file__).resolve().parents[2]
ALERTS = REPOSITORY / "deploy" / "prometheus" / "alerts.yml"
PROMETHEUS_RULE = REPOSITORY / "deploy" / "kubernetes" / "base" / "prometheusrule.yaml"
COMMAND = "python -m tests.deploy.prometheus_rule"

HEADER = f"""\
# GENERATED from deploy/prometheus/alerts.yml by `{COMMAND}`: do not edit.
# The alert rules as a Prometheus Operator PrometheusRule. Your Prometheus may select rules by
# a label (ruleSelector): add it in the overlay.
"""


class _Dumper(yaml.SafeDumper):
    """Block style; multi-line strings (the rules' expressions and descriptions) as `|`."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def rule_groups() -> list[dict[str, Any]]:
    document = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    groups = document["groups"]
    assert isinstance(groups, list)
    return groups


def render() -> str:
    resource = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "slot-expiration",
            "labels": {
                "app.kubernetes.io/name": "slot-expiration",
                "app.kubernetes.io/part-of": "calendar",
            },
        },
        "spec": {"groups": rule_groups()},
    }
    body = yaml.dump(resource, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)
    return HEADER + body


def main() -> None:
    PROMETHEUS_RULE.write_text(render(), encoding="utf-8")
    print(f"wrote {PROMETHEUS_RULE.relative_to(REPOSITORY)}")


if __name__ == "__main__":
    main()
