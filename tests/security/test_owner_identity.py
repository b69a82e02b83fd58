"""Tenants claiming another control plane's owner identity (clusterctl move).

The hub speaks for an RKCP by the identity stamped as ``kamaji-broker.io/owner-uid``, which
clusterctl move carries; a tenant can write that annotation by hand. Each case: the real hub and
agent loops (tests/hub/conftest.py), an attacker's RKCP carrying the victim's identity, and the
exact refusal; nothing of the victim changes (Secrets, TCP, the intent stream), no Secret reaches
the attacker, every loop lives on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from common import bus
from common.kube import resources
from hub.api import rkcp as api
from hub.reconcile.rkcp import vocabulary
from tests import helpers
from tests.hub.conftest import RKCP, World, open_world
from tests.security import tenants_support as t

TCP = resources.TENANT_CONTROL_PLANE


@pytest.fixture
async def world(conn: bus.Connection, prefix: str, tmp_path: Path) -> AsyncIterator[World]:
    async with open_world(conn, prefix, tmp_path) as w:
        yield w


async def claim(w: World, name: str, identity: str, *, namespace: str, finalized: bool) -> dict[str, Any]:
    """The attacker's Cluster and RKCP at the victim's coordinates, claiming ``identity``; with
    ``finalized`` it also carries the hub's finalizer, as a moved object does."""
    if await w.mgmt.get_or_none(resources.NAMESPACE, namespace) is None:
        await w.mgmt.create(resources.NAMESPACE, {"metadata": {"name": namespace}})
    cl = await w.mgmt.create(resources.CLUSTER, t.cluster_obj(name, namespace=namespace), namespace=namespace)
    body = t.rkcp_obj(name, namespace=namespace, cluster=cl, tenantControlPlaneName=t.VICTIM)
    body["metadata"]["annotations"] = {api.OWNER_UID_ANNOTATION: identity}
    if finalized:
        body["metadata"]["finalizers"] = [vocabulary.FINALIZER]
    return await w.mgmt.create(RKCP, body, namespace=namespace)


async def until_gone(w: World, r: resources.Resource, name: str) -> None:
    async def gone() -> bool:
        return await w.mgmt.get_or_none(r, name, namespace=t.VICTIM_NS) is None

    await helpers.eventually(gone, within=30, what=f"{r.kind} {name} gone")


# (id, with the hub's finalizer, the attacker's Ready reason)
LIVE_VICTIM = [
    ("created with the victim's identity: its own owner, the younger claim", False, "Conflict"),
    ("with the hub's finalizer too, as if moved: the identity is refused", True, "NotAuthorized"),
]


@pytest.mark.parametrize(
    ("finalized", "reason"), [c[1:] for c in LIVE_VICTIM], ids=[c[0] for c in LIVE_VICTIM]
)
async def test_the_identity_of_a_live_rkcp_takes_nothing(world: World, finalized: bool, reason: str) -> None:
    victim = await t.victim_ready(world)
    await t.share_target_namespace(world)
    before = await t.snapshot(world)
    made = await claim(world, "grab", victim["metadata"]["uid"], namespace="evil", finalized=finalized)
    grab = await t.until_condition(
        world, "grab", namespace="evil", type_="Ready", status="False", reason=reason
    )
    stamped = grab["metadata"]["annotations"][api.OWNER_UID_ANNOTATION]
    assert stamped == (victim["metadata"]["uid"] if finalized else made["metadata"]["uid"])
    refusals = t.refused(world, "OwnerMismatch")
    await t.redeliver_sealed(world)
    await t.until_refused_or_leaked(world, "grab", namespace="evil", refusals=refusals)
    assert await t.secrets_in(world, "evil") == [], "the hub wrote the victim's secrets for the attacker"
    assert await t.snapshot(world) == before
    assert t.alive(world)


@pytest.mark.parametrize("finalized", [False, True], ids=["created", "with the hub's finalizer"])
async def test_the_identity_of_an_orphaned_control_plane_takes_nothing(world: World, finalized: bool) -> None:
    """The victim deleted with deletionPolicy Orphan: its TCP runs on, its subjects are purged.
    Even an RKCP of the victim's own namespace and name claiming its identity does not adopt it."""
    victim = await t.victim_ready(world)
    await world.mgmt.patch(RKCP, t.VICTIM, {"spec": {"deletionPolicy": "Orphan"}}, namespace=t.VICTIM_NS)
    await world.mgmt.delete(RKCP, t.VICTIM, namespace=t.VICTIM_NS)
    await until_gone(world, RKCP, t.VICTIM)
    orphan = await world.site.get(TCP, t.VICTIM, namespace=t.TARGET_NS)
    await world.mgmt.delete(resources.CLUSTER, t.VICTIM, namespace=t.VICTIM_NS)
    await until_gone(world, resources.CLUSTER, t.VICTIM)
    await claim(world, t.VICTIM, victim["metadata"]["uid"], namespace=t.VICTIM_NS, finalized=finalized)
    if finalized:
        await t.until_condition(
            world, t.VICTIM, namespace=t.VICTIM_NS, type_="Ready", status="False", reason="NotAuthorized"
        )
    else:
        # Its own owner: the site refuses it the TCP of another owner.
        await t.until_condition(
            world,
            t.VICTIM,
            namespace=t.VICTIM_NS,
            type_="TenantControlPlaneReady",
            status="False",
            reason="Conflict",
        )
    after = await world.site.get(TCP, t.VICTIM, namespace=t.TARGET_NS)
    assert after["metadata"]["resourceVersion"] == orphan["metadata"]["resourceVersion"]
    assert await t.no_capi_secrets(world, t.VICTIM_NS, t.VICTIM)
    assert t.alive(world)
