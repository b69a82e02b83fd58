"""The sandbox's compact CRDs (sandbox/crds): valid structural CRDs, and true to Kamaji's real one.

The drift checks load Kamaji's real TenantControlPlane CRD from ../shared/fixtures (never copied
into this repository) and skip when it is absent.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from sandbox import crds
from sandbox.kamaji import crds as installing
from tests import helpers

REPO = Path(__file__).resolve().parents[2]

_TYPES = {"object", "array", "string", "integer", "number", "boolean"}
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


# The real CRD has 15,000 lines: parse each file once (with libyaml when present), copy per use.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _parsed(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as stream:
        document = yaml.load(stream, Loader=_Loader)
    assert isinstance(document, dict)
    return document


def load(path: Path) -> dict[str, Any]:
    return copy.deepcopy(_parsed(path))


def real_tcp_crd() -> dict[str, Any]:
    return load(helpers.kamaji_crd_path())


def only_version(crd: Mapping[str, Any]) -> dict[str, Any]:
    versions = crd["spec"]["versions"]
    assert len(versions) == 1
    version: dict[str, Any] = versions[0]
    return version


def schema_of(crd: Mapping[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = only_version(crd)["schema"]["openAPIV3Schema"]
    return schema


def structural_violations(node: Mapping[str, Any], path: str = "") -> Iterator[str]:
    """What makes ``node`` a non-structural schema (the rules of apiextensions.k8s.io/v1), by path.

    Checked: every node has a known type unless int-or-string or preserve-unknown (not at the
    root); properties only on objects, items on arrays; properties and additionalProperties
    not together; required names are properties; enum values and defaults match the type.
    """
    yield from _shape_violations(node, path or "<root>", root=not path)
    yield from _value_violations(node, path or "<root>")
    for name, child in (node.get("properties") or {}).items():
        yield from structural_violations(child, f"{path}.{name}")
    if isinstance(node.get("items"), Mapping):
        yield from structural_violations(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from structural_violations(node["additionalProperties"], f"{path}{{}}")


def _shape_violations(node: Mapping[str, Any], where: str, *, root: bool) -> Iterator[str]:
    kind = node.get("type")
    untyped_ok = node.get("x-kubernetes-int-or-string") or (
        not root and node.get("x-kubernetes-preserve-unknown-fields")
    )
    if kind is None and not untyped_ok:
        yield f"{where}: no type"
    if kind is not None and kind not in _TYPES:
        yield f"{where}: unknown type {kind!r}"
    if "properties" in node and kind != "object":
        yield f"{where}: properties on a non-object"
    if "properties" in node and "additionalProperties" in node:
        yield f"{where}: properties and additionalProperties together"
    if kind == "array" and "items" not in node:
        yield f"{where}: array without items"
    for name in node.get("required") or ():
        if name not in (node.get("properties") or {}) and not node.get(
            "x-kubernetes-preserve-unknown-fields"
        ):
            yield f"{where}: required {name!r} is not a property"


def _value_violations(node: Mapping[str, Any], where: str) -> Iterator[str]:
    kind = node.get("type")
    if kind not in _PYTHON_TYPES:
        return
    expected = _PYTHON_TYPES[kind]
    for value in node.get("enum") or ():
        if not isinstance(value, expected):
            yield f"{where}: enum value {value!r} is not {kind}"
    if "default" in node and not isinstance(node["default"], expected):
        yield f"{where}: default {node['default']!r} is not {kind}"
    if "default" in node and "enum" in node and node["default"] not in node["enum"]:
        yield f"{where}: default {node['default']!r} not in enum"


def typed_nodes(node: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every schema node by JSON path (``.spec.x``, ``[]`` for items), root first."""
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from typed_nodes(child, f"{path}.{name}")
    if isinstance(node.get("items"), Mapping):
        yield from typed_nodes(node["items"], f"{path}[]")


def node_at(schema: Mapping[str, Any], json_path: str) -> Mapping[str, Any] | None:
    node: Mapping[str, Any] | None = schema
    for part in json_path.strip(".").split("."):
        if node is None:
            return None
        node = (node.get("properties") or {}).get(part)
    return node


@pytest.mark.parametrize(
    ("path", "kind", "plural", "group", "version", "short"),
    [
        (
            crds.TENANT_CONTROL_PLANE,
            "TenantControlPlane",
            "tenantcontrolplanes",
            "kamaji.clastix.io",
            "v1alpha1",
            "tcp",
        ),
        (crds.CLUSTER, "Cluster", "clusters", "cluster.x-k8s.io", "v1beta1", "cl"),
    ],
    ids=["tenantcontrolplane", "cluster"],
)
def test_compact_crd_is_a_valid_crd(
    path: Path, kind: str, plural: str, group: str, version: str, short: str
) -> None:
    crd = load(path)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{plural}.{group}"
    spec = crd["spec"]
    assert (spec["group"], spec["scope"]) == (group, "Namespaced")
    names = spec["names"]
    assert (names["kind"], names["listKind"], names["plural"], names["singular"]) == (
        kind,
        f"{kind}List",
        plural,
        kind.lower(),
    )
    assert names["shortNames"] == [short]
    served = only_version(crd)
    assert (served["name"], served["served"], served["storage"]) == (version, True, True)
    assert served["subresources"]["status"] == {}
    schema = schema_of(crd)
    assert list(structural_violations(schema)) == []
    assert schema["properties"]["metadata"] == {"type": "object"}, "metadata must be left to the API server"
    assert schema["properties"]["status"].get("x-kubernetes-preserve-unknown-fields") is True


def test_printer_columns_and_scale_paths_exist_in_the_schema() -> None:
    for path in (*crds.ALL, *crds.TOPOLOGY):
        crd = load(path)
        schema = schema_of(crd)
        served = only_version(crd)
        for column in served.get("additionalPrinterColumns") or ():
            json_path = column["jsonPath"]
            if json_path.startswith(".metadata."):
                continue
            found = node_at(schema, json_path)
            # A column may read a preserved (untyped) field; a typed one must have the column's type.
            if found is not None:
                assert found.get("type") == column["type"], f"{path.name}: column {column['name']}"
    tcp = load(crds.TENANT_CONTROL_PLANE)
    schema = schema_of(tcp)
    scale = only_version(tcp)["subresources"]["scale"]
    assert scale == {
        "specReplicasPath": ".spec.controlPlane.deployment.replicas",
        "statusReplicasPath": ".status.kubernetesResources.deployment.replicas",
        "labelSelectorPath": ".status.kubernetesResources.deployment.selector",
    }
    for key, expected_type in (
        ("specReplicasPath", "integer"),
        ("statusReplicasPath", "integer"),
        ("labelSelectorPath", "string"),
    ):
        node = node_at(schema, scale[key])
        assert node is not None and node["type"] == expected_type, key
    columns = [c["name"] for c in only_version(tcp)["additionalPrinterColumns"]]
    assert columns == [
        "Version",
        "Installed Version",
        "Status",
        "Control-Plane endpoint",
        "Kubeconfig",
        "Datastore",
        "Age",
    ]


def test_compact_tcp_crd_requires_what_the_issue_names() -> None:
    spec = schema_of(load(crds.TENANT_CONTROL_PLANE))["properties"]["spec"]
    assert set(spec["required"]) == {"controlPlane", "kubernetes"}
    assert spec["properties"]["controlPlane"]["properties"]["service"]["required"] == ["serviceType"]
    assert set(spec["properties"]["kubernetes"]["required"]) == {"kubelet", "version"}


def test_load_reads_every_crd_document(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle.yaml"
    bundle.write_text(
        crds.TENANT_CONTROL_PLANE.read_text() + "\n---\nkind: ConfigMap\n---\n" + crds.CLUSTER.read_text()
    )
    assert [c["metadata"]["name"] for c in installing.load([bundle])] == [
        "tenantcontrolplanes.kamaji.clastix.io",
        "clusters.cluster.x-k8s.io",
    ]


# Drift against Kamaji's real CRD


def test_the_structural_checker_accepts_kamajis_real_crd() -> None:
    # Guards the checker itself: a checker stricter than the API server would prove nothing.
    assert list(structural_violations(schema_of(real_tcp_crd()))) == []


def test_compact_tcp_crd_names_match_kamaji() -> None:
    real, ours = real_tcp_crd(), load(crds.TENANT_CONTROL_PLANE)
    assert ours["metadata"]["name"] == real["metadata"]["name"]
    assert ours["spec"]["group"] == real["spec"]["group"]
    assert ours["spec"]["scope"] == real["spec"]["scope"]
    assert ours["spec"]["names"] == real["spec"]["names"]
    real_version, our_version = only_version(real), only_version(ours)
    assert our_version["name"] == real_version["name"]
    assert our_version["subresources"] == real_version["subresources"]
    assert [(c["name"], c["jsonPath"], c["type"]) for c in our_version["additionalPrinterColumns"]] == [
        (c["name"], c["jsonPath"], c["type"]) for c in real_version["additionalPrinterColumns"]
    ]


def compact_paths() -> list[str]:
    return [path for path, _ in typed_nodes(schema_of(load(crds.TENANT_CONTROL_PLANE))) if path]


@pytest.mark.parametrize("path", compact_paths())
def test_compact_tcp_field_matches_kamaji(path: str) -> None:
    """Each typed path of ours exists in Kamaji's CRD with the same type, format, enum and default,
    and requires exactly what Kamaji requires among the properties we type."""
    real_nodes = dict(typed_nodes(schema_of(real_tcp_crd())))
    ours = dict(typed_nodes(schema_of(load(crds.TENANT_CONTROL_PLANE))))[path]
    assert path in real_nodes, f"{path} does not exist in Kamaji's TenantControlPlane"
    real = real_nodes[path]
    for keyword in ("type", "format", "x-kubernetes-int-or-string", "x-kubernetes-list-type"):
        assert ours.get(keyword) == real.get(keyword), f"{path}: {keyword}"
    for keyword in ("enum", "default", "pattern", "minItems", "maxItems", "additionalProperties"):
        if keyword in ours:
            assert ours[keyword] == real.get(keyword), f"{path}: {keyword}"
    typed = set(ours.get("properties") or ())
    assert set(ours.get("required") or ()) == set(real.get("required") or ()) & typed, f"{path}: required"


def test_compact_tcp_crd_keeps_every_field_kamaji_accepts() -> None:
    """Where ours leaves out some of Kamaji's properties it preserves unknown fields, so the API
    server never prunes a field that a real Kamaji would store."""
    real_nodes = dict(typed_nodes(schema_of(real_tcp_crd())))
    missing = []
    for path, ours in typed_nodes(schema_of(load(crds.TENANT_CONTROL_PLANE))):
        real = real_nodes.get(path) or {}
        left_out = set(real.get("properties") or ()) - set(ours.get("properties") or ())
        if (
            path not in ("", ".metadata")
            and left_out
            and not ours.get("x-kubernetes-preserve-unknown-fields")
        ):
            missing.append(f"{path}: {sorted(left_out)}")
    assert missing == []


@pytest.mark.parametrize(
    ("path", "kind", "plural", "group"),
    [
        (crds.CLUSTER_CLASS, "ClusterClass", "clusterclasses", "cluster.x-k8s.io"),
        (crds.DOCKER_CLUSTER, "DockerCluster", "dockerclusters", "infrastructure.cluster.x-k8s.io"),
        (
            crds.DOCKER_CLUSTER_TEMPLATE,
            "DockerClusterTemplate",
            "dockerclustertemplates",
            "infrastructure.cluster.x-k8s.io",
        ),
    ],
    ids=["clusterclass", "dockercluster", "dockerclustertemplate"],
)
def test_compact_topology_crds_are_valid(path: Path, kind: str, plural: str, group: str) -> None:
    crd = load(path)
    assert crd["metadata"]["name"] == f"{plural}.{group}"
    names = crd["spec"]["names"]
    assert (names["kind"], names["listKind"], names["plural"]) == (kind, f"{kind}List", plural)
    assert crd["spec"]["scope"] == "Namespaced"
    served = only_version(crd)
    assert (served["name"], served["served"], served["storage"]) == ("v1beta1", True, True)
    assert list(structural_violations(schema_of(crd))) == []
    assert schema_of(crd)["properties"]["metadata"] == {"type": "object"}
