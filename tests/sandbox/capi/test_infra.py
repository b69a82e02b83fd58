"""sandbox.capi.infra: when a StandInCluster is called provisioned, by table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sandbox.capi import infra
from sandbox.launcher import workload

NOW = "2026-12-06T00:00:00Z"
ENDPOINT = {"host": "100.64.1.10", "port": 6443}
DONE = {"initialization": {"provisioned": True}, "conditions": [{"type": "Ready", "status": "True"}]}


def obj(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "c1", "generation": 2},
        "spec": spec,
        **({"status": status} if status else {}),
    }


@pytest.mark.parametrize(
    ("made", "provisions"),
    [
        pytest.param(obj({}), False, id="no-endpoint-yet"),
        pytest.param(obj({"controlPlaneEndpoint": {"host": "", "port": 0}}), False, id="empty-endpoint"),
        pytest.param(obj({"controlPlaneEndpoint": ENDPOINT}), True, id="endpoint-written"),
        pytest.param(obj({"controlPlaneEndpoint": ENDPOINT}, DONE), False, id="already-provisioned"),
        pytest.param(
            obj({"controlPlaneEndpoint": ENDPOINT}, {"initialization": {"provisioned": True}}),
            True,
            id="provisioned-without-ready-condition",
        ),
    ],
)
def test_provisioned(made: dict[str, Any], provisions: bool) -> None:
    patch = infra.provisioned(made, now=NOW)
    if not provisions:
        assert patch is None
        return
    assert patch is not None
    assert patch["status"]["initialization"] == {"provisioned": True}
    [ready] = patch["status"]["conditions"]
    assert (ready["type"], ready["status"], ready["observedGeneration"]) == ("Ready", "True", 2)


def rendered(path: Path) -> list[dict[str, Any]]:
    values = workload.template_values("c1", namespace="default", site="site-a", target_namespace="tenants")
    return workload.rendered(path, values)


def test_with_infrastructure_names_a_stand_in_of_the_clusters_name() -> None:
    made = infra.with_infrastructure(rendered(workload.CLUSTER_TEMPLATE), name="c1", namespace="default")
    by_kind = {d["kind"]: d for d in made}
    assert set(by_kind) == {"Cluster", "RemoteKamajiControlPlane", "StandInCluster"}
    ref = by_kind["Cluster"]["spec"]["infrastructureRef"]
    assert ref == {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "kind": "StandInCluster",
        "name": "c1",
    }
    assert by_kind["StandInCluster"]["metadata"] == {"name": "c1", "namespace": "default"}
    # The control plane reference is the template's, untouched.
    assert by_kind["Cluster"]["spec"]["controlPlaneRef"]["kind"] == "RemoteKamajiControlPlane"


def test_in_class_swaps_capds_template_for_the_stand_ins_and_nothing_else() -> None:
    values = {"NAMESPACE": "default", "KAMAJI_BROKER_TARGET_NAMESPACE": "tenants"}
    workers = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerMachineTemplate"}
    shipped = [*workload.rendered(workload.CLUSTER_CLASS, values), workers]
    made = infra.in_class(shipped)
    assert made[-1] == workers  # a worker's machine template is not the InfraCluster's
    kinds = [d["kind"] for d in made]
    assert kinds == [d["kind"].replace("DockerClusterTemplate", "StandInClusterTemplate") for d in shipped]
    [cls] = [d for d in made if d["kind"] == "ClusterClass"]
    [before] = [d for d in shipped if d["kind"] == "ClusterClass"]
    ref = next(
        cls["spec"]["infrastructure"][k] for k in ("ref", "templateRef") if k in cls["spec"]["infrastructure"]
    )
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == (
        "infrastructure.cluster.x-k8s.io/v1beta2",
        "StandInClusterTemplate",
        "kamaji-broker",
    )
    assert cls["spec"]["controlPlane"] == before["spec"]["controlPlane"]
    assert cls["spec"]["variables"] == before["spec"]["variables"]
    [template] = [d for d in made if d["kind"] == "StandInClusterTemplate"]
    assert template["metadata"] == {"name": "kamaji-broker", "namespace": "default"}
