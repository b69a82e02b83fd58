"""Faults at the site's API: a TCP deleted by hand is recreated, and an RKCP the
site refused can be deleted. Real processes throughout; each scenario ends with
the invariants of ``tests.faults.invariants``."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from agent.tcp import managed
from common.kube import resources
from sandbox.launcher import System, invariants, workload
from tests import helpers, systems
from tests.faults.measure import Measure

pytestmark = [pytest.mark.asyncio(loop_scope="module"), systems.BOTH]

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
TCP = resources.TENANT_CONTROL_PLANE
NS = "default"
UNSERVED = "elsewhere"
"""A target namespace the Site grants but the agents do not serve (they serve ``world.namespace``)."""


async def _tcp_uid(world: System, name: str, site: str) -> str | None:
    tcp = await world.site_kube(site).get_or_none(TCP, name, namespace=world.namespace)
    return None if tcp is None else str(tcp["metadata"]["uid"])


async def _ready_tcp(world: System, name: str, site: str) -> str | None:
    """Create control plane ``name`` at ``site``, wait until it is Ready; its TCP's uid."""
    await world.create_control_plane(name, site=site)

    async def ready() -> bool:
        obj = await world.mgmt.get_or_none(RKCP, name, namespace=NS)
        return obj is not None and invariants.conditions(obj).get("Ready") == "True"

    await helpers.eventually(ready, within=60, every=0.2)
    return await _tcp_uid(world, name, site)


async def _intent_seq(world: System, name: str, site: str) -> str:
    tcp = await world.site_kube(site).get(TCP, name, namespace=world.namespace)
    return str(tcp["metadata"]["annotations"][managed.INTENT_SEQ])


async def _kubectl_delete(world: System, site: str, name: str) -> None:
    kubectl = helpers.kubectl()
    proc = await asyncio.create_subprocess_exec(
        kubectl, "--kubeconfig", str(world.kubeconfig(site)), "-n", world.namespace,
        "delete", "tcp", name, "--wait=false",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={**os.environ},
    )  # fmt: skip
    out, _ = await proc.communicate()
    assert proc.returncode == 0, out.decode()


@pytest.mark.parametrize("how", ["kubectl", "api"])
async def test_tcp_deleted_at_the_site_is_recreated(world: System, fault: Measure, how: str) -> None:
    name, site = f"gone-{how}", "site-a"
    before = await _ready_tcp(world, name, site)
    assert before is not None
    seq = await _intent_seq(world, name, site)

    fault.inject(world, fault=f"TCP deleted at {site} ({how})", workload="1 Ready RKCP, 2 base RKCPs")
    if how == "kubectl":
        await _kubectl_delete(world, site, name)
    else:
        await world.site_kube(site).delete(TCP, name, namespace=world.namespace)
    await fault.lifted(world)

    async def recreated() -> bool:
        uid = await _tcp_uid(world, name, site)
        return uid is not None and uid != before and await invariants.converged(world)

    await helpers.eventually(recreated, within=60, every=0.3)
    await fault.converges(world)
    obj = await world.mgmt.get(RKCP, name, namespace=NS)
    assert invariants.conditions(obj)["TenantControlPlaneReady"] == "True"
    # The agent recreated it from the intent it had applied, from its watch: the hub had no
    # Deleted to answer, so it published nothing new.
    assert await _intent_seq(world, name, site) == seq

    await systems.delete_control_plane(world, name)
    deleted = [(NS, name, site)]
    await helpers.eventually(lambda: invariants.converged(world, deleted=deleted), within=60, every=0.3)
    assert await invariants.violations(world, deleted=deleted) == []


async def _grant_unserved(world: System, site: str) -> None:
    """Let the Site place control planes in ``UNSERVED`` too: the hub then sends the intent and
    the agent, which serves only ``world.namespace``, is the one that refuses it."""
    obj = await world.mgmt.get(resources.SITE, site)
    placements: list[dict[str, Any]] = list(obj["spec"].get("placements") or [])
    if any(UNSERVED in p.get("targetNamespaces", ()) for p in placements):
        return
    placements.append({"namespaces": [NS], "targetNamespaces": [UNSERVED]})
    await world.mgmt.patch(resources.SITE, site, {"spec": {"placements": placements}})


async def test_rkcp_the_site_refused_is_deleted(world: System, fault: Measure) -> None:
    name, site = "refused", "site-b"
    await _grant_unserved(world, site)
    cluster = await world.mgmt.create(resources.CLUSTER, workload.cluster(name, namespace=NS), namespace=NS)
    body = workload.remote_kamaji_control_plane(
        name, namespace=NS, cluster_uid=str(cluster["metadata"]["uid"]), site=site, target_namespace=UNSERVED
    )
    await world.mgmt.create(RKCP, body, namespace=NS)

    async def refused() -> bool:
        obj = await world.mgmt.get(RKCP, name, namespace=NS)
        tcp_ready = next(
            (
                c
                for c in obj.get("status", {}).get("conditions", ())
                if c["type"] == "TenantControlPlaneReady"
            ),
            None,
        )
        return tcp_ready is not None and (tcp_ready["status"], tcp_ready["reason"]) == (
            "False",
            "NamespaceNotAllowed",
        )

    await helpers.eventually(refused, within=60, every=0.2)

    fault.inject(world, fault="refused RKCP deleted", workload="1 RKCP refused by site-b")
    await systems.delete_control_plane(world, name)
    await fault.lifted(world)
    deleted = [(NS, name, site)]

    async def gone() -> bool:
        return await world.mgmt.get_or_none(RKCP, name, namespace=NS) is None

    await helpers.eventually(gone, within=60, every=0.3)
    await fault.converges(world, deleted=deleted)


async def test_tcp_deleted_while_the_agent_is_down_is_recreated(world: System, fault: Measure) -> None:
    """No watch event reaches an agent that is not running: it must find out when it starts."""
    name, site = "gone-while-down", "site-b"
    before = await _ready_tcp(world, name, site)
    what = f"agent-{site} SIGKILL, its TCP deleted, agent started"
    fault.inject(world, fault=what, workload="1 Ready RKCP")
    await world.kill(f"agent-{site}")
    await world.site_kube(site).delete(TCP, name, namespace=world.namespace)
    await world.start_again(f"agent-{site}")
    await fault.lifted(world)
    await fault.converges(world)
    assert await _tcp_uid(world, name, site) not in (None, before)
