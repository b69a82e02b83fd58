"""Handing a TCP an older agent wrote over to the agent's Apply: a table of managedFields."""

from __future__ import annotations

from typing import Any

import pytest

from agent.tcp import legacy
from agent.tcp import managed as tcps

OLDER: dict[str, Any] = {
    "manager": "OpenAPI-Generator",
    "operation": "Update",
    "apiVersion": "kamaji.clastix.io/v1alpha1",
    "time": "2026-01-01T00:00:00Z",
    "fieldsType": "FieldsV1",
    "fieldsV1": {
        "f:metadata": {"f:annotations": {f"f:{legacy.APPLIED_FIELDS}": {}, "f:kamaji-broker.io/owner": {}}},
        "f:spec": {"f:networkProfile": {"f:certSANs": {}}, "f:kubernetes": {"f:version": {}}},
    },
}
OURS = {
    "manager": tcps.MANAGER,
    "operation": "Apply",
    "apiVersion": "kamaji.clastix.io/v1alpha1",
    "time": "2026-02-01T00:00:00Z",
    "fieldsType": "FieldsV1",
    "fieldsV1": {"f:spec": {"f:kubernetes": {"f:version": {}, "f:kubelet": {}}}},
}
KAMAJI = {
    "manager": "kamaji",
    "operation": "Update",
    "subresource": "status",
    "fieldsType": "FieldsV1",
    "fieldsV1": {"f:status": {"f:kubernetesResources": {}}},
}
ADMIN = {
    "manager": "kubectl-edit",
    "operation": "Update",
    "fieldsType": "FieldsV1",
    "fieldsV1": {"f:spec": {"f:controlPlane": {"f:deployment": {"f:replicas": {}}}}},
}
OLDER_STATUS = {**OLDER, "subresource": "status"}


def tcp(*managed: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": "cp1", "uid": "u-1", "resourceVersion": "42", "managedFields": list(managed)}
    return {"metadata": meta}


HAND_OVER: list[tuple[str, dict[str, Any], list[dict[str, Any]] | None]] = [
    # id, the TCP, the managedFields after the handover (None: nothing to hand over)
    ("no managedFields", {"metadata": {"name": "cp1"}}, None),
    ("only ours and others'", tcp(OURS, KAMAJI, ADMIN), None),
    ("an Update of a subresource is not the older agent", tcp(OLDER_STATUS), None),
    (
        "the older agent's entry becomes our Apply; others' stay",
        tcp(KAMAJI, OLDER, ADMIN),
        [KAMAJI, ADMIN, {k: v for k, v in OLDER.items() if k not in ("manager", "operation")}],
    ),
    (
        "beside an Apply of ours already there: one Apply owning both",
        tcp(OURS, OLDER, KAMAJI),
        [
            KAMAJI,
            {
                **{k: v for k, v in OURS.items() if k not in ("manager", "operation")},
                "fieldsV1": {
                    "f:spec": {
                        "f:kubernetes": {"f:version": {}, "f:kubelet": {}},
                        "f:networkProfile": {"f:certSANs": {}},
                    },
                    "f:metadata": OLDER["fieldsV1"]["f:metadata"],
                },
            },
        ],
    ),
]


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in HAND_OVER], ids=[c[0] for c in HAND_OVER])
def test_handover(obj: dict[str, Any], expected: list[dict[str, Any]] | None) -> None:
    patch = legacy.handover(obj)
    if expected is None:
        assert patch is None
        return
    assert patch is not None
    meta = patch["metadata"]
    # Fenced: another TCP of that name, or one changed since it was read, is never rewritten.
    assert (meta["uid"], meta["resourceVersion"]) == ("u-1", "42")
    *others, apply = meta["managedFields"]
    assert others == expected[:-1]
    assert apply == {"manager": tcps.MANAGER, "operation": "Apply", **expected[-1]}


def test_marked_while_the_older_agents_annotations_are_there() -> None:
    obj = tcp(OURS)
    assert not legacy.marked(obj)
    obj["metadata"]["annotations"] = {legacy.APPLIED_HASH: "x"}
    assert legacy.marked(obj)
