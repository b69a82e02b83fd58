"""sandbox.capi.ownership: the merge patch CAPI's Cluster controller would make, by table."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.capi import ownership

CLUSTER = {"apiVersion": "cluster.x-k8s.io/v1beta1", "metadata": {"name": "c1", "uid": "u-1"}}
MINE = ownership.owner_reference(CLUSTER)
LABELS = {ownership.CLUSTER_NAME_LABEL: "c1"}
OTHER_OWNER = {"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "u-9"}
OTHER_CONTROLLER = {**OTHER_OWNER, "kind": "Cluster", "name": "c2", "controller": True}


def obj(**meta: Any) -> dict[str, Any]:
    return {"kind": "RemoteKamajiControlPlane", "metadata": {"name": "cp", "namespace": "team-a", **meta}}


@pytest.mark.parametrize(
    ("meta", "patch"),
    [
        pytest.param({}, {"metadata": {"ownerReferences": [MINE], "labels": LABELS}}, id="bare"),
        pytest.param({"ownerReferences": [MINE], "labels": LABELS}, None, id="already-so"),
        pytest.param({"ownerReferences": [MINE]}, {"metadata": {"labels": LABELS}}, id="label-only"),
        pytest.param(
            {"ownerReferences": [OTHER_OWNER], "labels": LABELS},
            {"metadata": {"ownerReferences": [OTHER_OWNER, MINE]}},
            id="other-owners-kept",
        ),
        pytest.param(
            {"ownerReferences": [{**MINE, "controller": False}], "labels": LABELS},
            {"metadata": {"ownerReferences": [MINE]}},
            id="owner-made-controller",
        ),
        pytest.param(
            {"labels": {ownership.CLUSTER_NAME_LABEL: "c0"}, "ownerReferences": [MINE]},
            {"metadata": {"labels": LABELS}},
            id="wrong-label-corrected",
        ),
    ],
)
def test_adoption(meta: dict[str, Any], patch: dict[str, Any] | None) -> None:
    assert ownership.adoption(CLUSTER, obj(**meta)) == patch


def test_another_controller_is_named_and_nothing_is_taken() -> None:
    with pytest.raises(ownership.AlreadyOwned, match="team-a/cp is already controlled by Cluster c2"):
        ownership.adoption(CLUSTER, obj(ownerReferences=[OTHER_CONTROLLER]))
