"""CAPI's control-plane status contract end to end (issue 13 §2): the hub's controller on an
emulated management cluster, a real nats-server, the real agent loops at an emulated site.

The scale subresource (``kubectl scale``) reads ``spec.replicas``, ``status.replicas`` and
``status.selector``; the replica counts and RollingOut/ScalingUp/ScalingDown follow what the site
reports; Available says why it is not, when it is not.
"""

from __future__ import annotations

from typing import Any

from common.kube import resources
from tests import helpers
from tests.hub.conftest import RKCP, World, condition, create_pair, until_ready

TCP = resources.TENANT_CONTROL_PLANE


async def test_scaled_through_the_scale_subresource_the_counts_follow_the_site(world: World) -> None:
    world.start_hub()
    world.start_agent()
    await create_pair(world)
    obj = await until_ready(world)
    assert obj["status"]["selector"] == "kamaji.clastix.io/name=cp1"
    for type_, reason in (("RollingOut", "NotRollingOut"), ("ScalingUp", "NotScalingUp"),
                          ("ScalingDown", "NotScalingDown"), ("Available", "Available")):  # fmt: skip
        assert condition(obj, type_) == ("False" if reason.startswith("Not") else "True", reason), type_

    # kubectl scale rkcp cp1 --replicas=3
    scale = await world.mgmt.patch(
        RKCP, "cp1", {"spec": {"replicas": 3}}, namespace="default", subresource="scale"
    )
    assert scale["status"] == {"replicas": 2, "selector": "kamaji.clastix.io/name=cp1"}

    def scaled(o: dict[str, Any] | None) -> bool:
        s = (o or {}).get("status") or {}
        counts = [s.get(k) for k in ("replicas", "readyReplicas", "updatedReplicas", "availableReplicas")]
        return counts == [3, 3, 3, 3] and condition(o, "ScalingUp") == ("False", "NotScalingUp")

    await helpers.eventually(lambda: world.rkcp(), scaled, within=30, what="3 replicas reported")
    tcp = await world.site.get(TCP, "cp1", namespace="tenants")
    assert tcp["spec"]["controlPlane"]["deployment"]["replicas"] == 3
    # An empty patch reads the Scale (the client's get has no subresource).
    scale = await world.mgmt.patch(RKCP, "cp1", {}, namespace="default", subresource="scale")
    assert (scale["spec"], scale["status"]) == (
        {"replicas": 3},
        {"replicas": 3, "selector": "kamaji.clastix.io/name=cp1"},
    )


async def test_without_its_site_an_rkcp_is_not_available_and_says_why(world: World) -> None:
    world.start_hub()  # no agent: the site never sends a heartbeat
    await create_pair(world)

    def waiting(o: dict[str, Any] | None) -> bool:
        return condition(o, "Available") == ("False", "NotAvailable")

    obj = await helpers.eventually(lambda: world.rkcp(), waiting, within=20, what="NotAvailable")
    assert obj is not None
    [available] = [c for c in obj["status"]["conditions"] if c["type"] == "Available"]
    assert available["message"] == "site site-a has not connected yet (no heartbeat from its agent)"
    assert condition(obj, "ScalingUp") == ("True", "ScalingUp")
