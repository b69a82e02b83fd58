"""sandbox.capi.ownership: the merge patch CAPI's Cluster controller would make, by table."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.capi import ownership

PLAIN = {"apiVersion": "cluster.x-k8s.io/v1beta1", "metadata": {"name": "c1", "uid": "u-1"}, "spec": {}}
TOPOLOGY = {**PLAIN, "spec": {"topology": {"class": "kamaji-broker", "version": "v1.31.0"}}}
OWNER = {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": "c1", "uid": "u-1"}
CONTROLLER = {**OWNER, "controller": True, "blockOwnerDeletion": True}
LABELS = {ownership.CLUSTER_NAME_LABEL: "c1"}
OTHER_OWNER = {"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "u-9"}
OTHER_CONTROLLER = {**OTHER_OWNER, "kind": "Cluster", "name": "c2", "controller": True}


def obj(**meta: Any) -> dict[str, Any]:
    return {"kind": "RemoteKamajiControlPlane", "metadata": {"name": "cp", "namespace": "team-a", **meta}}


@pytest.mark.parametrize(
    ("cluster", "meta", "patch"),
    [
        pytest.param(
            PLAIN, {}, {"metadata": {"ownerReferences": [OWNER], "labels": LABELS}}, id="plain-owner"
        ),
        pytest.param(
            TOPOLOGY,
            {},
            {"metadata": {"ownerReferences": [CONTROLLER], "labels": LABELS}},
            id="topology-controller",
        ),
        pytest.param(PLAIN, {"ownerReferences": [OWNER], "labels": LABELS}, None, id="already-so"),
        pytest.param(PLAIN, {"ownerReferences": [OWNER]}, {"metadata": {"labels": LABELS}}, id="label-only"),
        pytest.param(
            PLAIN,
            {"ownerReferences": [OTHER_OWNER], "labels": LABELS},
            {"metadata": {"ownerReferences": [OTHER_OWNER, OWNER]}},
            id="other-owners-kept",
        ),
        pytest.param(
            PLAIN,
            {"ownerReferences": [OTHER_CONTROLLER], "labels": LABELS},
            {"metadata": {"ownerReferences": [OTHER_CONTROLLER, OWNER]}},
            id="plain-owner-beside-another-controller",
        ),
        pytest.param(
            TOPOLOGY,
            {"ownerReferences": [OWNER], "labels": LABELS},
            {"metadata": {"ownerReferences": [CONTROLLER]}},
            id="topology-owner-made-controller",
        ),
        pytest.param(
            PLAIN,
            {"ownerReferences": [{**OWNER, "apiVersion": "cluster.x-k8s.io/v1beta2"}], "labels": LABELS},
            {"metadata": {"ownerReferences": [OWNER]}},
            id="same-owner-other-version-replaced",
        ),
        pytest.param(
            PLAIN,
            {"labels": {ownership.CLUSTER_NAME_LABEL: "c0"}, "ownerReferences": [OWNER]},
            {"metadata": {"labels": LABELS}},
            id="wrong-label-corrected",
        ),
    ],
)
def test_adoption(cluster: dict[str, Any], meta: dict[str, Any], patch: dict[str, Any] | None) -> None:
    assert ownership.adoption(cluster, obj(**meta)) == patch


def test_a_topology_cluster_takes_nothing_another_controller_owns() -> None:
    with pytest.raises(ownership.AlreadyOwned, match="team-a/cp is already controlled by Cluster c2"):
        ownership.adoption(TOPOLOGY, obj(ownerReferences=[OTHER_CONTROLLER]))
