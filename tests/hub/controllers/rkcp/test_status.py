"""CAPI's control-plane status contract end to end: the hub's controller on an
emulated management cluster, a real nats-server, the real agent loops at an emulated site.

The scale subresource (``kubectl scale``) reads ``spec.replicas``, ``status.replicas`` and
``status.selector``; the replica counts and RollingOut/ScalingUp/ScalingDown follow what the site
reports; Available says why it is not, when it is not.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

from common.kube import resources
from tests import helpers
from tests.hub.conftest import RKCP, SITE, World, condition, create_pair, until_ready

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


async def test_at_rest_an_rkcp_is_not_written_while_heartbeats_go_on(world: World) -> None:
    """Zero status writes per RKCP when nothing changes: resyncs every 0.2 s and
    heartbeats every 0.3 s for 2 s leave the object as it was."""
    controller = world.start_hub(resync=0.2)
    world.start_agent()
    await create_pair(world)
    await until_ready(world)
    synced = await helpers.eventually(
        lambda: world.rkcp(), lambda o: condition(o, "SecretsSynced")[0] == "True", within=30, what="synced"
    )
    # Settled: the last write is at least one status-write interval old and nothing else is due.
    assert synced is not None
    settled = await _unchanged_for(world, 1.5, synced["metadata"]["resourceVersion"])
    sites = controller.deps.sites

    def heard() -> dt.datetime | None:
        return sites.snapshot(SITE, dt.datetime.now(dt.UTC)).last_heartbeat_time

    first = heard()
    assert first is not None
    await helpers.eventually(
        heard,
        lambda t: t is not None and (t - first).total_seconds() >= 2.0,
        within=20,
        what="heartbeats for 2 s",
    )
    obj = await world.rkcp()
    assert obj is not None and obj["metadata"]["resourceVersion"] == settled


async def _unchanged_for(world: World, seconds: float, version: str) -> str:
    """Wait until the RKCP's resourceVersion has stayed the same for ``seconds``; return it."""
    loop = asyncio.get_running_loop()
    since = loop.time()

    async def steady() -> str | None:
        nonlocal version, since
        obj = await world.rkcp()
        current = str((obj or {}).get("metadata", {}).get("resourceVersion", ""))
        if current != version:
            version, since = current, loop.time()
        return version if loop.time() - since >= seconds else None

    return str(await helpers.eventually(steady, within=30, every=0.1, what=f"no write for {seconds}s"))
