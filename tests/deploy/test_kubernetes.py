"""deploy/kubernetes: the kustomize base and the example overlay render with kubectl; every
built-in kind passes `kubernetes-validate --strict`; the PodMonitor and the PrometheusRule pass
the Prometheus Operator's CRD schemas; and the manifests say what docs/deploy.md promises."""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.crd_schemas import validator
from tests.deploy.prometheus_rule import PROMETHEUS_RULE, render, rule_groups
from tests.deploy.timing import worst_graceful_stop_seconds
from tests.support.promtool import RUNBOOK_BASE, promtool, runbook_anchors

pytestmark = pytest.mark.deploy

REPOSITORY = Path(__file__).resolve().parents[2]
KUBERNETES = REPOSITORY / "deploy" / "kubernetes"
BASE = KUBERNETES / "base"
OVERLAY = KUBERNETES / "overlays" / "example"
DASHBOARD = REPOSITORY / "deploy" / "grafana" / "calendar-overview.json"
KUBERNETES_VALIDATE = Path(sys.executable).parent / "kubernetes-validate"
# The release of the kubectl that renders here, and the newest kubernetes-validate knows.
KUBERNETES_VERSIONS = ("1.32.0", None)
CRD_GROUP = "monitoring.coreos.com"
BUILT_IN_KINDS = {
    "ServiceAccount",
    "ConfigMap",
    "Deployment",
    "Job",
    "PodDisruptionBudget",
    "NetworkPolicy",
}
WORKER_LABELS = {
    "app.kubernetes.io/name": "slot-expiration",
    "app.kubernetes.io/component": "worker",
}
KUSTOMIZATIONS = pytest.mark.parametrize("directory", [BASE, OVERLAY], ids=["base", "overlay"])

Manifest = dict[str, Any]


def _kubectl_kustomize(directory: Path) -> subprocess.CompletedProcess[str]:
    kubectl = shutil.which("kubectl")
    # kubectl (with kustomize v5) comes with this kind of machine; Debian's kubernetes-client
    # is too old for these kustomizations.
    assert kubectl is not None, "kubectl is missing: install kubectl 1.27 or newer"
    return subprocess.run(
        [kubectl, "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@functools.cache
def _rendered(directory: Path) -> str:
    done = _kubectl_kustomize(directory)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _manifests(directory: Path) -> list[Manifest]:
    return [doc for doc in yaml.safe_load_all(_rendered(directory)) if doc]


def _one(directory: Path, kind: str) -> Manifest:
    (found,) = [m for m in _manifests(directory) if m["kind"] == kind]
    return found


def _rule(directory: Path, name: str) -> Manifest:
    """The PrometheusRule called `name`."""
    (found,) = [
        m
        for m in _manifests(directory)
        if m["kind"] == "PrometheusRule" and m["metadata"]["name"] == name
    ]
    return found


def _pod_specs(directory: Path) -> dict[str, Manifest]:
    return {
        m["kind"]: m["spec"]["template"]["spec"]
        for m in _manifests(directory)
        if m["kind"] in {"Deployment", "Job"}
    }


def _containers(pod: Manifest) -> list[Manifest]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def _env(container: Manifest) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


@KUSTOMIZATIONS
def test_kubectl_kustomize_renders_every_resource(directory: Path) -> None:
    kinds = sorted(m["kind"] for m in _manifests(directory))
    # The overlay adds the rule for its own deployment, never scraped.
    rules = ["PrometheusRule"] * (2 if directory == OVERLAY else 1)

    assert kinds == sorted([*BUILT_IN_KINDS, "ConfigMap", "PodMonitor", *rules])  # 2 ConfigMaps


@KUSTOMIZATIONS
@pytest.mark.parametrize("version", KUBERNETES_VERSIONS, ids=lambda v: v or "newest")
def test_every_built_in_kind_passes_kubernetes_validate_strict(
    directory: Path, version: str | None, tmp_path: Path
) -> None:
    built_in = [m for m in _manifests(directory) if not m["apiVersion"].startswith(CRD_GROUP)]
    rendered = tmp_path / "built-in.yaml"
    rendered.write_text(yaml.safe_dump_all(built_in), encoding="utf-8")

    done = _kubernetes_validate(rendered, version)

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("passed for resource") == len(built_in), done.stdout


def test_kubernetes_validate_strict_refuses_a_misspelt_field(tmp_path: Path) -> None:
    deployment = _one(OVERLAY, "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolice"] = "Always"
    rendered = tmp_path / "deployment.yaml"
    rendered.write_text(yaml.safe_dump(deployment), encoding="utf-8")

    done = _kubernetes_validate(rendered, None)

    assert done.returncode != 0
    assert "'imagePullPolice' was unexpected" in done.stdout + done.stderr


def _kubernetes_validate(path: Path, version: str | None) -> subprocess.CompletedProcess[str]:
    versions = ["--kubernetes-version", version] if version else []
    return subprocess.run(
        [str(KUBERNETES_VALIDATE), "--strict", "--no-warn", *versions, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@KUSTOMIZATIONS
def test_podmonitor_and_prometheusrule_pass_the_prometheus_operator_crd_schemas(
    directory: Path,
) -> None:
    custom = [m for m in _manifests(directory) if m["apiVersion"].startswith(CRD_GROUP)]

    assert {m["kind"] for m in custom} == {"PodMonitor", "PrometheusRule"}
    for manifest in custom:
        errors = [e.message for e in validator(manifest["kind"]).iter_errors(manifest)]
        assert errors == [], manifest["kind"]


def test_the_crd_schemas_refuse_an_unknown_field_and_a_malformed_duration() -> None:
    monitor, rule = _one(OVERLAY, "PodMonitor"), _rule(OVERLAY, "slot-expiration")
    monitor["spec"]["podMetricsEndpoints"][0]["intervall"] = "30s"
    rule["spec"]["groups"][0]["rules"][0]["for"] = "5 minutes"

    monitor_errors = [e.message for e in validator("PodMonitor").iter_errors(monitor)]
    rule_errors = [e.message for e in validator("PrometheusRule").iter_errors(rule)]

    assert monitor_errors == ["Additional properties are not allowed ('intervall' was unexpected)"]
    assert len(rule_errors) == 1
    assert "'5 minutes' does not match" in rule_errors[0]


def test_the_prometheusrule_is_the_one_generated_from_alerts_yml() -> None:
    committed = PROMETHEUS_RULE.read_text(encoding="utf-8")

    assert committed == render(), "run: .venv/bin/python -m tests.deploy.prometheus_rule"
    assert yaml.safe_load(committed)["spec"]["groups"] == rule_groups()
    assert _rule(BASE, "slot-expiration")["spec"]["groups"] == rule_groups()


def test_the_dashboard_configmap_holds_the_dashboard_file_for_grafanas_sidecar() -> None:
    (dashboard,) = [
        m
        for m in _manifests(OVERLAY)
        if m["kind"] == "ConfigMap" and "calendar-overview.json" in m.get("data", {})
    ]

    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["data"]["calendar-overview.json"] == DASHBOARD.read_text(encoding="utf-8")
    assert json.loads(dashboard["data"]["calendar-overview.json"])["uid"] == "calendar-overview"


def test_the_deployment_runs_two_leaderless_replicas_serving_probes_on_the_metrics_port() -> None:
    deployment = _one(OVERLAY, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (worker,) = pod["containers"]
    env = _env(worker)

    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert worker["args"] == ["run"]
    assert env["SLOT_EXPIRATION_METRICS_ADDR"] == "0.0.0.0:9464"
    assert worker["ports"] == [{"name": "metrics", "containerPort": 9464, "protocol": "TCP"}]
    assert worker["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert worker["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert deployment["spec"]["template"]["metadata"]["labels"].items() >= WORKER_LABELS.items()


def test_the_termination_grace_period_outlasts_a_graceful_stop() -> None:
    pod = _pod_specs(OVERLAY)["Deployment"]

    assert pod["terminationGracePeriodSeconds"] > worst_graceful_stop_seconds()


def test_every_container_has_memory_requests_and_limits_above_the_measured_resident_size() -> None:
    measured_idle_mib = 72  # 71.6 MiB idle with OTLP tracing on (docs/deploy.md, "Sizing")
    for pod in _pod_specs(OVERLAY).values():
        for container in _containers(pod):
            resources = container["resources"]
            request = _mebibytes(resources["requests"]["memory"])
            limit = _mebibytes(resources["limits"]["memory"])
            assert measured_idle_mib < request <= limit, container["name"]
            assert resources["requests"]["cpu"], container["name"]
            assert resources["limits"]["cpu"], container["name"]


def _mebibytes(quantity: str) -> int:
    parsed = re.fullmatch(r"(\d+)(Mi|Gi)", quantity)
    assert parsed is not None, quantity
    return int(parsed.group(1)) * (1024 if parsed.group(2) == "Gi" else 1)


@pytest.mark.parametrize("kind", ["Deployment", "Job"])
def test_pods_run_non_root_read_only_without_capabilities_or_a_token(kind: str) -> None:
    pod = _pod_specs(OVERLAY)[kind]

    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in _containers(pod):
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True, container["name"]
        assert context["allowPrivilegeEscalation"] is False, container["name"]
        assert context["capabilities"] == {"drop": ["ALL"]}, container["name"]
    account = _one(OVERLAY, "ServiceAccount")
    assert account["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == account["metadata"]["name"]


@KUSTOMIZATIONS
def test_no_password_is_written_into_any_manifest(directory: Path) -> None:
    rendered = _rendered(directory)

    assert not re.search(r"postgres(?:ql)?://[^/\s\"']*@", rendered)
    assert "Secret" not in {m["kind"] for m in _manifests(directory)}
    for pod in _pod_specs(directory).values():
        for container in _containers(pod):
            env = _env(container)
            assert env["SLOT_EXPIRATION_DATABASE_URL"] == "postgresql://"
            assert set(env["PGPASSWORD"]) == {"secretKeyRef"}, container["name"]


def test_the_migration_job_migrates_then_grants_the_workers_role_as_the_table_owner() -> None:
    pod = _pod_specs(OVERLAY)["Job"]
    (migrate,), (grant,) = pod["initContainers"], pod["containers"]
    database = _one_config(OVERLAY)

    assert pod["restartPolicy"] == "Never"
    assert migrate["args"] == ["migrate"]
    assert grant["args"] == ["grant", "--role", "$(WORKER_ROLE)"]
    assert _env(grant)["WORKER_ROLE"]["configMapKeyRef"] == {"name": database, "key": "PGUSER"}
    for container in (migrate, grant):
        env = _env(container)
        assert env["PGUSER"]["secretKeyRef"]["name"] == "slot-expiration-owner-db"
        assert env["PGPASSWORD"]["secretKeyRef"]["name"] == "slot-expiration-owner-db"
    worker = _pod_specs(OVERLAY)["Deployment"]["containers"][0]
    assert _env(worker)["PGPASSWORD"]["secretKeyRef"]["name"] == "slot-expiration-worker-db"
    assert "PGUSER" not in _env(worker)  # the worker's role, from the ConfigMap
    assert worker["image"] == migrate["image"] == grant["image"]


def _one_config(directory: Path) -> str:
    (name,) = [
        m["metadata"]["name"]
        for m in _manifests(directory)
        if m["kind"] == "ConfigMap" and "PGUSER" in m.get("data", {})
    ]
    return str(name)


def test_the_disruption_budget_keeps_a_replica_running() -> None:
    budget = _one(OVERLAY, "PodDisruptionBudget")
    replicas = _one(OVERLAY, "Deployment")["spec"]["replicas"]

    assert budget["spec"]["selector"]["matchLabels"] == WORKER_LABELS
    assert budget["spec"]["maxUnavailable"] < replicas


def test_the_network_policy_lets_in_scrapes_and_out_postgresql_and_dns_only() -> None:
    policy = _one(OVERLAY, "NetworkPolicy")["spec"]

    assert policy["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "slot-expiration"}
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    ingress_ports = [p for rule in policy["ingress"] for p in rule["ports"]]
    assert ingress_ports == [{"protocol": "TCP", "port": 9464}]
    egress_ports = sorted((p["protocol"], p["port"]) for r in policy["egress"] for p in r["ports"])
    assert egress_ports == [("TCP", 53), ("TCP", 5432), ("UDP", 53)]
    assert policy["egress"][0]["to"] == [{"ipBlock": {"cidr": "10.20.0.15/32"}}]


def test_the_podmonitor_scrapes_the_workers_metrics_port() -> None:
    monitor = _one(OVERLAY, "PodMonitor")["spec"]
    worker = _one(OVERLAY, "Deployment")["spec"]["template"]["spec"]["containers"][0]

    assert monitor["selector"]["matchLabels"] == WORKER_LABELS
    (endpoint,) = monitor["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] in {port["name"] for port in worker["ports"]}


def test_the_overlay_sets_the_runbook_base_of_every_alert_and_keeps_each_anchor() -> None:
    overlay = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text(encoding="utf-8"))
    generators = overlay["configMapGenerator"]
    (runbook,) = [g for g in generators if g["name"] == "slot-expiration-runbook"]
    base = runbook["literals"][0].removeprefix("base=")
    in_base = _alerts_runbook_urls(BASE)

    in_overlay = _alerts_runbook_urls(OVERLAY)

    assert base != RUNBOOK_BASE
    assert in_overlay == {a: url.replace(RUNBOOK_BASE, base) for a, url in in_base.items()}
    assert {url.partition("#")[2] for url in in_overlay.values()} <= runbook_anchors()
    names = [m["metadata"]["name"] for m in _manifests(OVERLAY) if m["kind"] == "ConfigMap"]
    assert "slot-expiration-runbook" not in names  # kustomize's own input, not applied


def _alerts_runbook_urls(directory: Path) -> dict[str, str]:
    groups = _rule(directory, "slot-expiration")["spec"]["groups"]
    rules = [rule for group in groups for rule in group["rules"] if "alert" in rule]
    return {rule["alert"]: rule["annotations"]["runbook_url"] for rule in rules}


NEVER_SCRAPED = "slot-expiration-never-scraped"
NEVER_SCRAPED_TEST = Path(__file__).with_name("never_scraped_test.yml")


def test_the_overlay_generates_the_never_scraped_rule_for_its_own_namespace() -> None:
    overlay = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text(encoding="utf-8"))
    (rule,) = [r for g in _rule(OVERLAY, NEVER_SCRAPED)["spec"]["groups"] for r in g["rules"]]

    assert overlay["namespace"] == "calendar"
    assert 'absent(up{namespace="calendar", job=~"(.+/)?slot-expiration"})' in rule["expr"]
    assert "NAMESPACE" not in rule["expr"]
    assert rule["alert"] == "SlotExpirationNotReporting"
    assert rule["annotations"]["runbook_url"].partition("#")[2] in runbook_anchors()


def test_the_never_scraped_rule_fires_for_its_deployment_beside_another_one_scraped(
    tmp_path: Path,
) -> None:
    """promtool's tests (tests/deploy/never_scraped_test.yml) of the overlay's rule as
    kustomize renders it, beside the base's rules it reads."""
    groups = [
        group
        for name in ("slot-expiration", NEVER_SCRAPED)
        for group in _rule(OVERLAY, name)["spec"]["groups"]
    ]
    rules = yaml.safe_load(NEVER_SCRAPED_TEST.read_text(encoding="utf-8"))["rule_files"]
    (tmp_path / rules[0]).write_text(yaml.safe_dump({"groups": groups}), encoding="utf-8")
    shutil.copy(NEVER_SCRAPED_TEST, tmp_path)

    tested = promtool("test", "rules", NEVER_SCRAPED_TEST.name, cwd=tmp_path)

    assert tested.returncode == 0, tested.output


def test_the_overlay_deploys_the_image_tagged_with_the_pyproject_version() -> None:
    with (REPOSITORY / "pyproject.toml").open("rb") as file:
        version = tomllib.load(file)["project"]["version"]

    containers = [c for pod in _pod_specs(OVERLAY).values() for c in _containers(pod)]

    assert {c["image"] for c in containers} == {
        f"registry.example.com/calendar/slot-expiration:{version}"
    }
    assert {c["imagePullPolicy"] for c in containers} == {"IfNotPresent"}
    assert {m["metadata"].get("namespace") for m in _manifests(OVERLAY)} == {"calendar"}
