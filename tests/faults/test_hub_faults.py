"""Faults at the hub: the hub killed mid-burst and
started again, the leader killed with a standby taking over, the hub offline while the sites
report. Real processes throughout, two hub replicas with leader election (this module's own
topology, with a Kamaji delay of 1 s so a burst is still being provisioned when the fault
strikes); each scenario ends with the invariants of ``sandbox.launcher.invariants``.

What a restarted (or newly elected) hub must heal here: its durable consumer does not deliver
again what the previous process acknowledged, typically the sealed secrets; statuses arrive
before its first reconcile; a box acknowledged and never written (a SIGKILL between the two);
CAPI Secrets gone stale because the site renewed its secrets while no hub ran.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from common.kube import resources
from hub.controllers.rkcp.writing import CLUSTER_NAME_LABEL
from sandbox.launcher import System, invariants
from sandbox.launcher.broker import HUB_LEASE
from tests import helpers, systems
from tests.faults.conftest import BASE, SITES
from tests.faults.measure import Measure

pytestmark = [pytest.mark.asyncio(loop_scope="module"), systems.BOTH]

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
TCP = resources.TENANT_CONTROL_PLANE
NS = "default"
HUBS = ("hub", "hub-1")
Names = list[tuple[str, str]]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[System]:
    """This module's topology: two hub replicas electing a leader (the conftest's has one)."""
    kubernetes = systems.backend(request)
    directory = tmp_path_factory.mktemp("hub-faults") / "sandbox"
    settings = {"hub_replicas": 2, "kamaji_delay": 1.0, "kubernetes": kubernetes}
    async with systems.running(directory, sites=SITES, base=BASE, **settings) as w:
        yield w


def burst(prefix: str, per_site: int) -> Names:
    return [(f"{prefix}-{site}-{i}", site) for site in SITES for i in range(1, per_site + 1)]


async def create(world: System, names: Names) -> None:
    await asyncio.gather(*(world.create_control_plane(name, site=site) for name, site in names))


async def conditions_of(world: System, names: Names) -> dict[str, dict[str, str]]:
    wanted = {name for name, _ in names}
    return {
        obj["metadata"]["name"]: invariants.conditions(obj)
        for obj in (await world.mgmt.list(RKCP, namespace=NS)).items
        if obj["metadata"]["name"] in wanted
    }


async def mid_burst(world: System, names: Names) -> bool:
    """Some of the burst has its CAPI Secrets written: the hub is acknowledging and writing
    boxes while, with a Kamaji delay of 1 s, most of the burst is still being provisioned."""
    states = (await conditions_of(world, names)).values()
    return any(c.get("SecretsSynced") == "True" for c in states)


async def remove(world: System, names: Names) -> None:
    """Delete the scenario's control planes and wait until they are gone with their TCPs, so
    the next scenario starts from the base alone."""
    for name, _ in names:
        await systems.delete_control_plane(world, name)
    deleted = [(NS, name, site) for name, site in names]
    await helpers.eventually(lambda: invariants.converged(world, deleted=deleted), within=120, every=0.5)
    # Their CAPI Secrets too: a real cluster's garbage collector removes them a while after their
    # Cluster, and the next scenario counts the Secrets it finds.
    clusters = {name for name, _ in names}

    async def secrets_gone() -> bool:
        found = await world.mgmt.list(resources.SECRET, namespace=NS, label_selector=CLUSTER_NAME_LABEL)
        return not any(
            (s["metadata"].get("labels") or {}).get(CLUSTER_NAME_LABEL) in clusters for s in found.items
        )

    await helpers.eventually(secrets_gone, within=120, every=0.5)


async def kill_hubs(world: System) -> None:
    """SIGKILL every hub replica at once: no standby left, the hub is down."""
    await asyncio.gather(*(world.kill(name) for name in HUBS))


async def start_hubs(world: System) -> None:
    await asyncio.gather(*(world.start_again(name) for name in HUBS))


async def ready_conditions(world: System) -> dict[str, list[dict[str, Any]]]:
    """Every RKCP's Ready condition (its lastTransitionTime moves if it flaps)."""
    return {
        obj["metadata"]["name"]: [c for c in obj["status"]["conditions"] if c["type"] == "Ready"]
        for obj in (await world.mgmt.list(RKCP, namespace=NS)).items
    }


async def capi_secret_versions(world: System) -> dict[str, str]:
    """Every CAPI Secret's resourceVersion (it moves if the Secret is written again)."""
    found = await world.mgmt.list(resources.SECRET, namespace=NS, label_selector=CLUSTER_NAME_LABEL)
    return {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in found.items}


async def lease(world: System) -> dict[str, Any]:
    return dict((await world.mgmt.get(resources.LEASE, HUB_LEASE, namespace=world.lease_namespace))["spec"])


async def test_hub_killed_mid_burst_converges(world: System, fault: Measure) -> None:
    names = burst("crash", per_site=6)
    await create(world, names)
    await helpers.eventually(lambda: mid_burst(world, names), within=60, every=0.1)

    fault.inject(
        world, fault="both hub replicas SIGKILL mid-burst, started again", workload="12 RKCPs created"
    )
    await kill_hubs(world)
    await start_hubs(world)
    await fault.lifted(world)
    await fault.converges(world)

    await remove(world, names)


async def test_hub_leader_killed_mid_burst_the_standby_takes_over(world: System, fault: Measure) -> None:
    names = burst("takeover", per_site=6)
    await create(world, names)
    await helpers.eventually(lambda: mid_burst(world, names), within=60, every=0.1)
    leader = await world.leader()
    [standby] = [name for name in HUBS if name != leader]

    fault.inject(world, fault=f"hub leader ({leader}) SIGKILL mid-burst", workload="12 RKCPs created")
    await world.kill(leader)
    # Not started again: the standby takes over on its own once the Lease expires.
    await fault.lifted(world)
    await fault.converges(world)
    assert await world.leader() == standby

    # The killed replica comes back as a standby, and nothing flaps: the Lease stays where it
    # is, no Ready condition moves, no CAPI Secret is written again.
    before = await lease(world)
    ready_since, secrets = await ready_conditions(world), await capi_secret_versions(world)
    marks = world.log_marks()
    await world.start_again(leader)
    # The leader renews every third of the Lease duration: two renewals after the restart mean
    # the returned replica has watched a live Lease for a while (its elector polls it). The
    # renewTime is fixed-width RFC 3339 with microseconds (hub.leader): strings compare.
    for _ in range(2):
        await _renewed_after(world, str((await lease(world)).get("renewTime")))
    after = await lease(world)
    assert (after["holderIdentity"], after.get("leaseTransitions")) == (
        standby,
        before.get("leaseTransitions"),
    )
    async with aiohttp.ClientSession() as http, http.get(f"{world.hub_health_urls[leader]}/readyz") as answer:
        assert "standby" in await answer.text()
    assert await ready_conditions(world) == ready_since
    assert await capi_secret_versions(world) == secrets
    assert await invariants.violations(world, since=marks) == []

    await remove(world, names)


async def _renewed_after(world: System, seen: str) -> None:
    async def later() -> bool:
        return str((await lease(world)).get("renewTime")) > seen

    await helpers.eventually(later, within=15, every=0.2)


async def _tcp(world: System, name: str, site: str) -> dict[str, Any] | None:
    return await world.site_kube(site).get_or_none(TCP, name, namespace=world.namespace)


async def _site_kubeconfig(world: System, name: str, site: str) -> str:
    secret = await world.site_kube(site).get_or_none(
        resources.SECRET, f"{name}-admin-kubeconfig", namespace=world.namespace
    )
    return str(((secret or {}).get("data") or {}).get("admin.conf") or "")


async def _capi_kubeconfig(world: System, name: str) -> str:
    secret = await world.mgmt.get_or_none(resources.SECRET, f"{name}-kubeconfig", namespace=NS)
    return str(((secret or {}).get("data") or {}).get("value") or "")


def _reason(obj: dict[str, Any] | None, type_: str) -> str:
    for c in ((obj or {}).get("status") or {}).get("conditions") or ():
        if c["type"] == type_:
            return str(c.get("reason") or "")
    return ""


def _tcp_ready(tcp: dict[str, Any] | None) -> bool:
    version = ((tcp or {}).get("status") or {}).get("kubernetesResources", {}).get("version", {})
    return bool(version.get("status") == "Ready")


async def test_hub_offline_while_the_sites_report(world: System, fault: Measure) -> None:
    """Statuses and sealed secrets reach the streams while no hub
    runs (the burst still provisioning; two TCPs deleted at their sites and recreated by their
    agents with new certificates, so their CAPI Secrets are stale); then the hub starts."""
    names = burst("offline", per_site=5)
    renewed = [names[0], names[len(names) // 2]]
    """One control plane per site whose secrets the site renews while the hub is away."""
    await create(world, names)

    async def published_and_renewed_ready() -> bool:
        objs = {o["metadata"]["name"]: o for o in (await world.mgmt.list(RKCP, namespace=NS)).items}
        published = [
            _reason(objs.get(name), "IntentDelivered") not in ("", "NotPublished") for name, _ in names
        ]
        ready = [invariants.conditions(objs.get(name) or {}).get("Ready") == "True" for name, _ in renewed]
        return all(published) and all(ready)

    await helpers.eventually(published_and_renewed_ready, within=60, every=0.1)
    old_uids = {name: str((await _tcp(world, name, site) or {})["metadata"]["uid"]) for name, site in renewed}

    fault.inject(
        world,
        fault="hub offline (both replicas killed) while the sites report; 2 TCPs deleted at their sites",
        workload="10 RKCPs provisioning",
    )
    await kill_hubs(world)
    for name, site in renewed:
        await world.site_kube(site).delete(TCP, name, namespace=world.namespace)

    async def sites_reported() -> bool:
        for name, site in names:
            tcp = await _tcp(world, name, site)
            if not _tcp_ready(tcp):
                return False
            if name in old_uids and str((tcp or {})["metadata"]["uid"]) == old_uids[name]:
                return False
        return True

    await helpers.eventually(sites_reported, within=60, every=0.2)
    for name, site in renewed:
        # What the hub must heal: the site's kubeconfig is new, the CAPI Secret is stale.
        assert await _site_kubeconfig(world, name, site) != await _capi_kubeconfig(world, name)
    await start_hubs(world)
    await fault.lifted(world)
    await fault.converges(world)

    await remove(world, names)
