"""Faults at the site's TCPs and in the RKCP's fields: a field removed from an RKCP
leaves the TCP, and edits and deletions made at the site while the hub is offline are undone.

Real processes throughout (the agents run with the default 5-minute anti-entropy period, so
convergence here comes from their TCP watch); each scenario ends with the invariants of
``sandbox.launcher.invariants``, whose spec check compares every field the hub's mapping gives
for the RKCP (and none we applied and no longer want) with the TCP at the site.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest

from agent.tcp import managed
from common.kube import resources
from sandbox.launcher import System, invariants
from tests import helpers, systems
from tests.faults.measure import Measure

# The timeout covers the module's topology start too (pytest-timeout counts fixture setup in
# the first test): it took 106 s on the shared 2-core machine with two busy loops beside it.
pytestmark = [pytest.mark.asyncio(loop_scope="module"), systems.BOTH, pytest.mark.timeout(300)]

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
TCP = resources.TENANT_CONTROL_PLANE
NS = "default"
LABELS = {"team.example.com/owner": "drift", "tier": "gold"}
SANS = ["drift.example.com", "10.0.0.42"]


async def kubectl(world: System, site: str, *args: str, editor: str = "") -> None:
    """``kubectl -n <target namespace> <args>`` against ``site`` (``editor``: KUBE_EDITOR for edit)."""
    env = {**os.environ, **({"KUBE_EDITOR": editor} if editor else {})}
    proc = await asyncio.create_subprocess_exec(
        helpers.kubectl(),
        "--kubeconfig", str(world.kubeconfig(site)), "-n", world.namespace, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env,
    )  # fmt: skip
    out, _ = await proc.communicate()
    assert proc.returncode == 0, out.decode()


async def ready(world: System, *names: str) -> None:
    async def all_ready() -> bool:
        for name in names:
            obj = await world.mgmt.get_or_none(RKCP, name, namespace=NS)
            if obj is None or invariants.conditions(obj).get("Ready") != "True":
                return False
        return True

    await helpers.eventually(all_ready, within=60, every=0.2)


async def tcp(world: System, name: str, site: str) -> dict[str, Any] | None:
    return await world.site_kube(site).get_or_none(TCP, name, namespace=world.namespace)


def service_labels(obj: dict[str, Any] | None) -> Any:
    service = ((obj or {}).get("spec") or {}).get("controlPlane", {}).get("service", {})
    return (service.get("additionalMetadata") or {}).get("labels")


def _same(old: dict[str, Any] | None, now: dict[str, Any]) -> bool:
    """The fields the scenario changed at the site are back to what they were."""

    def fields(obj: dict[str, Any] | None) -> tuple[Any, ...]:
        spec = (obj or {}).get("spec") or {}
        return (
            spec["kubernetes"]["version"],
            spec["controlPlane"]["deployment"]["replicas"],
            service_labels(obj),
        )

    return fields(old) == fields(now)


async def test_a_field_removed_from_the_rkcp_is_removed_at_the_site(world: System, fault: Measure) -> None:
    name, site = "drift-removed", "site-b"
    await world.create_control_plane(name, site=site, network={"certSANs": SANS, "serviceLabels": LABELS})
    await ready(world, name)
    before = await tcp(world, name, site)
    assert before is not None
    assert before["spec"]["networkProfile"]["certSANs"] == SANS and service_labels(before) == LABELS

    fault.inject(world, fault="certSANs and service labels removed from the RKCP", workload="1 Ready RKCP")
    await systems.update_control_plane(world, name, network={"certSANs": None, "serviceLabels": None})
    await fault.lifted(world)

    async def removed() -> bool:
        obj = await tcp(world, name, site)
        return obj is not None and "certSANs" not in obj["spec"]["networkProfile"] and not service_labels(obj)

    await helpers.eventually(removed, within=60, every=0.3)
    await fault.converges(world, within=60)

    after = await tcp(world, name, site)
    assert after is not None and after["metadata"]["uid"] == before["metadata"]["uid"]
    assert "certSANs" not in after["spec"]["networkProfile"] and service_labels(after) is None
    # What the CRD's defaulting set beside them stays.
    assert after["spec"]["networkProfile"]["port"] == before["spec"]["networkProfile"]["port"]
    assert after["spec"]["controlPlane"]["service"]["serviceType"] == "LoadBalancer"


async def test_edits_and_deletions_at_the_site_while_the_hub_is_offline_are_undone(
    world: System, fault: Measure
) -> None:
    site = "site-a"
    names = [f"drift-{what}" for what in ("deleted", "version", "edited", "label")]
    for name in names:
        extra: dict[str, Any] = {"network": {"serviceLabels": LABELS}} if name == "drift-label" else {}
        await world.create_control_plane(name, site=site, **extra)
    await ready(world, *names)
    before = {name: await tcp(world, name, site) for name in names}

    fault.inject(
        world,
        fault=f"hub SIGKILL; at {site}: a TCP deleted, version+replicas patched, replicas edited, a service "
        "label changed; hub started again",
        workload="4 Ready RKCPs at site-a, 2 base RKCPs",
    )
    await world.kill("hub")
    await kubectl(world, site, "delete", "tcp", "drift-deleted", "--wait=false")
    edit = {"spec": {"kubernetes": {"version": "v1.29.0"}, "controlPlane": {"deployment": {"replicas": 3}}}}
    await kubectl(world, site, "patch", "tcp", "drift-version", "--type", "merge", "-p", json.dumps(edit))
    # kubectl edit as a site admin runs it, with an editor that changes the replicas in place.
    await kubectl(
        world, site, "edit", "tcp", "drift-edited", editor="sed -i -e 's/replicas: 2$/replicas: 5/'"
    )
    label = {"spec": {"controlPlane": {"service": {"additionalMetadata": {"labels": {"tier": "changed"}}}}}}
    await kubectl(world, site, "patch", "tcp", "drift-label", "--type", "merge", "-p", json.dumps(label))

    async def healed_at_the_site() -> bool:
        # Without the hub: the agent undoes all of it from its watch and the intents in NATS.
        for name in names:
            obj = await tcp(world, name, site)
            if obj is None or obj["metadata"].get("deletionTimestamp") or not _same(before[name], obj):
                return False
        return True

    await helpers.eventually(healed_at_the_site, within=60, every=0.3)
    await world.start_again("hub")
    await fault.lifted(world)
    await fault.converges(world, within=60)

    for name in names:
        now, old = await tcp(world, name, site), before[name]
        assert now is not None and old is not None
        recreated = name == "drift-deleted"
        assert (now["metadata"]["uid"] != old["metadata"]["uid"]) is recreated
        assert (
            now["metadata"]["annotations"][managed.INTENT_SEQ]
            == old["metadata"]["annotations"][managed.INTENT_SEQ]
        )
    assert service_labels(await tcp(world, "drift-label", site)) == LABELS
