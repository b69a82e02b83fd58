"""sandbox.capi.infra: when a StandInCluster is called provisioned, by table."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.capi import infra

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
