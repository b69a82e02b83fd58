"""sandbox.capi.topology: what CAPI's topology controller would make of a ClusterClass-based Cluster."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sandbox.capi import topology
from sandbox.launcher import workload

UID = "1f0e9d8c-7b6a-5c4d-3e2f-1a0b9c8d7e6f"
CP_KIND = "RemoteKamajiControlPlaneTemplate"
CP_API = "controlplane.cluster.x-k8s.io/v1alpha1"


def cluster(**topology_fields: Any) -> dict[str, Any]:
    made = workload.topology_cluster("c1", namespace="team-a", site="site-b", target_namespace="tenants")
    made["metadata"]["uid"] = UID
    made["spec"]["topology"].update(topology_fields)
    return made


def cluster_class() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The shipped ClusterClass and its two templates, as clusterctl renders them."""
    docs = workload.cluster_class(namespace="team-a", target_namespace="tenants")
    by_kind = {d["kind"]: d for d in docs}
    return by_kind["ClusterClass"], by_kind[CP_KIND], by_kind["DockerClusterTemplate"]


def test_the_control_plane_of_the_shipped_class() -> None:
    cc, cp_template, _ = cluster_class()
    made = topology.control_plane(cluster(), cc, cp_template)
    assert made["apiVersion"] == CP_API and made["kind"] == "RemoteKamajiControlPlane"
    meta = made["metadata"]
    assert (meta["name"], meta["namespace"]) == ("c1-1f0e9", "team-a")
    assert meta["labels"] == {"cluster.x-k8s.io/cluster-name": "c1", "topology.cluster.x-k8s.io/owned": ""}
    assert meta["annotations"] == {
        "cluster.x-k8s.io/cloned-from-name": "kamaji-broker",
        "cluster.x-k8s.io/cloned-from-groupkind": f"{CP_KIND}.controlplane.cluster.x-k8s.io",
    }
    assert meta["ownerReferences"] == [
        {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": "c1", "uid": UID}
    ]
    # The template's spec, the placement from the variables, version and replicas from the topology.
    assert made["spec"] == {
        "network": {"serviceType": "LoadBalancer"},
        "addons": {"coreDNS": {}, "kubeProxy": {}},
        "site": "site-b",
        "targetNamespace": "tenants",
        "version": "v1.31.0",
        "replicas": 2,
    }


def test_the_infrastructure_cluster_and_the_references() -> None:
    cc, cp_template, infra_template = cluster_class()
    infra = topology.infrastructure_cluster(cluster(), cc, infra_template)
    assert (infra["kind"], infra["metadata"]["name"], infra["spec"]) == ("DockerCluster", "c1-1f0e9", {})
    control = topology.control_plane(cluster(), cc, cp_template)
    assert topology.references(control, infra) == {
        "spec": {
            "controlPlaneRef": {
                "apiVersion": CP_API,
                "kind": "RemoteKamajiControlPlane",
                "name": "c1-1f0e9",
                "namespace": "team-a",
            },
            "infrastructureRef": {
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "DockerCluster",
                "name": "c1-1f0e9",
                "namespace": "team-a",
            },
        }
    }


def _class_with(
    patches: list[dict[str, Any]], variables: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    cc = copy.deepcopy(cluster_class()[0])
    cc["spec"]["patches"] = patches
    if variables is not None:
        cc["spec"]["variables"] = variables
    return cc


def _patch(
    *ops: dict[str, Any], kind: str = CP_KIND, target: str = "controlPlane", **extra: Any
) -> dict[str, Any]:
    selector = {"apiVersion": CP_API, "kind": kind, "matchResources": {target: True}}
    return {"name": "p", "definitions": [{"selector": selector, "jsonPatches": list(ops)}], **extra}


def _var(path: str, variable: str) -> dict[str, Any]:
    return {"op": "add", "path": path, "valueFrom": {"variable": variable}}


PATCHED = [
    pytest.param([], {}, {}, id="no-patch-no-change"),
    pytest.param(
        [_patch({"op": "add", "path": "/spec/template/spec/registry", "value": "r.example.com"})],
        {},
        {"registry": "r.example.com"},
        id="literal-value",
    ),
    pytest.param(
        [_patch(_var("/spec/template/spec/dataStoreName", "builtin.cluster.name"))],
        {},
        {"dataStoreName": "c1"},
        id="builtin-variable",
    ),
    pytest.param(
        [_patch(_var("/spec/template/spec/site", "site"))],
        {},
        {"site": "site-b"},
        id="cluster-variable",
    ),
    pytest.param(
        [_patch({"op": "replace", "path": "/spec/template/spec/network/serviceType", "value": "NodePort"})],
        {},
        {"network": {"serviceType": "NodePort"}},
        id="replace",
    ),
    pytest.param(
        [_patch({"op": "remove", "path": "/spec/template/spec/addons/kubeProxy"})],
        {},
        {"addons": {"coreDNS": {}}},
        id="remove",
    ),
    pytest.param(
        [_patch({"op": "add", "path": "/spec/template/spec/registry", "value": "x"}, kind="Other")],
        {},
        {},
        id="other-kind-not-selected",
    ),
    pytest.param(
        [
            _patch(
                {"op": "add", "path": "/spec/template/spec/registry", "value": "x"},
                target="infrastructureCluster",
            )
        ],
        {},
        {},
        id="other-target-not-selected",
    ),
    pytest.param(
        [_patch(_var("/spec/template/spec/targetNamespace", "ns"))],
        {
            "ns": {
                "name": "ns",
                "required": True,
                "schema": {"openAPIV3Schema": {"type": "string", "default": "dflt"}},
            }
        },
        {"targetNamespace": "dflt"},
        id="required-variable-defaulted",
    ),
]


@pytest.mark.parametrize(("patches", "variables", "expected"), PATCHED)
def test_patches(patches: list[dict[str, Any]], variables: dict[str, Any], expected: dict[str, Any]) -> None:
    _, cp_template, _ = cluster_class()
    cc = _class_with(patches, list(variables.values()) or None)
    made = topology.control_plane(cluster(), cc, cp_template)
    base = {"network": {"serviceType": "LoadBalancer"}, "addons": {"coreDNS": {}, "kubeProxy": {}}}
    assert made["spec"] == {**base, **expected, "version": "v1.31.0", "replicas": 2}


REFUSED = [
    pytest.param(
        _class_with([_patch(_var("/spec/template/spec/site", "nope"))]),
        cluster(),
        "patch 'p': variable 'nope' is not set",
        id="unknown-variable",
    ),
    pytest.param(
        _class_with(
            [_patch({"op": "add", "path": "/spec/template/spec/x", "valueFrom": {"template": "{{ .a }}"}})]
        ),
        cluster(),
        "patch 'p': valueFrom.template is not simulated",
        id="go-template",
    ),
    pytest.param(
        _class_with([_patch(enabledIf="{{ true }}")]),
        cluster(),
        "patch 'p': enabledIf and external patches are not simulated",
        id="enabled-if",
    ),
    pytest.param(
        _class_with([_patch({"op": "replace", "path": "/spec/template/spec/absent/x", "value": 1})]),
        cluster(),
        "patch 'p' on team-a/kamaji-broker:",
        id="patch-that-cannot-apply",
    ),
    pytest.param(
        _class_with(
            [], [{"name": "site", "required": True, "schema": {"openAPIV3Schema": {"type": "string"}}}]
        ),
        cluster(variables=[]),
        "variable 'site' is required by ClusterClass team-a/kamaji-broker",
        id="required-variable-missing",
    ),
    pytest.param(
        cluster_class()[0],
        cluster(version=""),
        "Cluster team-a/c1 has no spec.topology.version",
        id="no-version",
    ),
]


@pytest.mark.parametrize(("cc", "obj", "message"), REFUSED)
def test_what_cannot_be_made_is_refused_naming_it(
    cc: dict[str, Any], obj: dict[str, Any], message: str
) -> None:
    with pytest.raises(topology.TopologyError) as info:
        topology.control_plane(obj, cc, cluster_class()[1])
    assert message in str(info.value)


def test_a_cluster_without_a_uid_gets_nothing_yet() -> None:
    obj = cluster()
    del obj["metadata"]["uid"]
    with pytest.raises(topology.TopologyError, match="has no uid yet"):
        topology.control_plane(obj, *cluster_class()[:2])


DRIFT = [
    pytest.param({}, {"version": "v1.31.0", "replicas": 2}, None, id="in-step"),
    pytest.param(
        {"version": "v1.32.0"},
        {"version": "v1.31.0", "replicas": 2},
        {"spec": {"version": "v1.32.0"}},
        id="upgrade",
    ),
    pytest.param(
        {"controlPlane": {"replicas": 3}},
        {"version": "v1.31.0", "replicas": 2},
        {"spec": {"replicas": 3}},
        id="scale",
    ),
    pytest.param(
        {"controlPlane": {}}, {"version": "v1.31.0", "replicas": 5}, None, id="replicas-not-managed"
    ),
]


@pytest.mark.parametrize(("change", "spec", "expected"), DRIFT)
def test_drift(change: dict[str, Any], spec: dict[str, Any], expected: dict[str, Any] | None) -> None:
    assert topology.drift(cluster(**change), {"spec": spec}) == expected


T0, T1 = "2026-12-02T08:00:00Z", "2026-12-02T08:05:00Z"
FAILED = {
    "type": "TopologyReconciled",
    "status": "False",
    "severity": "Error",
    "reason": "TopologyReconcileFailed",
    "message": "ClusterClass default/x not found",
    "lastTransitionTime": T0,
}
DONE = {"type": "TopologyReconciled", "status": "True", "lastTransitionTime": T0}
OTHER = {"type": "InfrastructureReady", "status": "True", "lastTransitionTime": T0}

RECONCILED = [
    pytest.param([], "ClusterClass default/x not found", [{**FAILED, "lastTransitionTime": T1}], id="fails"),
    pytest.param([FAILED], "ClusterClass default/x not found", None, id="still-failing-nothing-to-write"),
    pytest.param([FAILED], "patch 'site': variable 'site' is not set",
                 [{**FAILED, "message": "patch 'site': variable 'site' is not set"}],
                 id="fails-otherwise-same-time"),
    pytest.param([OTHER, FAILED], "", [OTHER, {**DONE, "lastTransitionTime": T1}], id="made-others-kept"),
    pytest.param([DONE], "", None, id="made-nothing-to-write"),
]  # fmt: skip


@pytest.mark.parametrize(("conditions", "error", "expected"), RECONCILED)
def test_reconciled(
    conditions: list[dict[str, Any]], error: str, expected: list[dict[str, Any]] | None
) -> None:
    obj = {**cluster(), "status": {"conditions": conditions}}
    assert topology.reconciled(obj, error, now=T1) == expected
