"""clusterctl move in one process: the hub of a second emulated management cluster takes over the
running TenantControlPlane (no Conflict, no delete); a hand-set owner identity takes nothing.
The process version (real hub processes, the sandbox's launcher) is tests/faults/test_move.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from common import kube as ckube
from common.kube import resources
from hub.api import cluster
from hub.api import rkcp as api
from hub.reconcile.rkcp import vocabulary
from protocol import keys
from tests import helpers, moving
from tests.hub.conftest import (
    GRANT,
    RKCP,
    SITE,
    World,
    cluster_obj,
    condition,
    create_pair,
    open_kube,
    rkcp_obj,
    site_obj,
    until_ready,
)

TCP = resources.TENANT_CONTROL_PLANE


async def _cluster(world: World, name: str) -> dict[str, Any]:
    return await world.mgmt.create(resources.CLUSTER, cluster_obj(f"{name}-cluster"), namespace="default")


def _conflicts(obj: dict[str, Any] | None) -> list[str]:
    conds = ((obj or {}).get("status") or {}).get("conditions") or ()
    return [
        f"{c['type']}={c['reason']}" for c in conds if "Conflict" in c["reason"] or "Mismatch" in c["reason"]
    ]


async def _hand_over(world: World, target: ckube.Kube) -> None:
    """The source hub (still running) lets go of the object the move deleted; it stops and the
    target's hub starts."""
    source = world.controller
    assert source is not None
    await helpers.eventually(lambda: ("default", "cp1") not in source.rkcps, within=10)
    await world.stop("hub")
    world.mgmt = world.hub_kube = target
    world.start_hub()


async def _resumed(world: World, target: ckube.Kube, first_uid: str) -> dict[str, Any]:
    """Unpause the moved Cluster; the RKCP is Ready, without Conflict, under the first identity
    (the intent taken over may still be on its way: the status, not the summary)."""
    await moving.resume(target, namespace="default", cluster="cp1-cluster")
    after = await until_ready(world, summary=False)
    assert _conflicts(after) == [] and after["metadata"]["annotations"][api.OWNER_UID_ANNOTATION] == first_uid
    return after


@pytest.mark.parametrize("annotation", ["carried", "lost"])
async def test_the_new_management_cluster_takes_over_the_running_tcp(
    world: World, tmp_path: Path, annotation: str
) -> None:
    """``lost``: the object arrives without the identity annotation (moved from a hub older than
    it, or dropped by a ``kubectl replace``): the hub takes up the identity its subject names."""
    world.start_hub()
    world.start_agent()
    await create_pair(world)
    before = await until_ready(world)
    first_uid = before["metadata"]["uid"]
    assert before["metadata"]["annotations"][api.OWNER_UID_ANNOTATION] == first_uid  # stamped
    tcp_uid = (await world.site.get(TCP, "cp1", namespace="tenants"))["metadata"]["uid"]
    seq = await world.last_intent_seq()
    async with open_kube(tmp_path) as target:
        await target.create(resources.SITE, site_obj(SITE, GRANT))  # the target's provider is set up
        moved = await moving.move(world.mgmt, target, namespace="default", cluster="cp1-cluster")
        if annotation == "lost":
            gone = {"metadata": {"annotations": {api.OWNER_UID_ANNOTATION: None}}}
            await target.patch(RKCP, "cp1", gone, namespace="default")
        await _hand_over(world, target)
        # Paused in the target: hands off, and no Conflict either.
        paused = await helpers.eventually(
            world.rkcp, lambda o: condition(o, "Paused") == ("True", "Paused"), within=20, what="Paused"
        )
        assert paused is not None and paused["metadata"]["uid"] == moved.uids[first_uid] != first_uid
        assert _conflicts(paused) == []
        after = await _resumed(world, target, first_uid)
        assert condition(after, "TenantControlPlaneReady")[0] == "True"
        # The TCP was never deleted nor recreated, and nothing was published: the intent on the
        # subject is still the first hub's provision for the stamped identity.
        assert (await world.site.get(TCP, "cp1", namespace="tenants"))["metadata"]["uid"] == tcp_uid
        assert await world.last_intent_seq() == seq
        [intent] = await world.intents()
        assert (intent.op, intent.owner.uid) == ("provision", first_uid)
        # The CAPI Secrets in the target: the site's, owned by the object as it is now.
        kc = await target.get(resources.SECRET, "cp1-cluster-kubeconfig", namespace="default")
        site_kc = await world.site.get(resources.SECRET, "cp1-admin-kubeconfig", namespace="tenants")
        assert kc["data"]["value"] == site_kc["data"]["admin.conf"]
        assert [o["uid"] for o in kc["metadata"]["ownerReferences"]] == [after["metadata"]["uid"]]
        # A spec change after the move reaches the site under the stamped identity.
        await target.patch(RKCP, "cp1", {"spec": {"replicas": 3}}, namespace="default")

        async def scaled() -> bool:
            tcp = await world.site.get(TCP, "cp1", namespace="tenants")
            return bool(tcp["spec"]["controlPlane"]["deployment"]["replicas"] == 3)

        await helpers.eventually(scaled, within=30)
        assert (await world.site.get(TCP, "cp1", namespace="tenants"))["metadata"]["uid"] == tcp_uid
        await world.stop("hub")  # before the target's client closes


async def test_a_move_after_a_signing_rotation_takes_over_by_the_earlier_key(
    world: World, tmp_path: Path
) -> None:
    """The target's hub signs with a new key; the subject still holds the intent the earlier key
    signed. It verifies against the hub's public keys (--hub-public-keys): the identity is the
    hub's, taken over, and the intent signed again by the new key for the same owner."""
    world.start_hub()
    world.start_agent()
    await create_pair(world)
    first_uid = (await until_ready(world))["metadata"]["uid"]
    tcp_uid = (await world.site.get(TCP, "cp1", namespace="tenants"))["metadata"]["uid"]
    new = keys.new_signing_key()
    entry = keys.public_entry(bytes(new.verify_key), created_at=helpers.T0)
    world.public = msgspec.structs.replace(world.public, signing=(*world.public.signing, entry))
    async with open_kube(tmp_path) as target:
        await target.create(resources.SITE, site_obj(SITE, GRANT))
        await moving.move(world.mgmt, target, namespace="default", cluster="cp1-cluster")
        world.signer = new
        await _hand_over(world, target)
        await _resumed(world, target, first_uid)

        async def resigned() -> bool:
            return [(i.key_id, i.owner.uid) for i in await world.intents()] == [(entry.key_id, first_uid)]

        await helpers.eventually(resigned, within=15)
        assert (await world.site.get(TCP, "cp1", namespace="tenants"))["metadata"]["uid"] == tcp_uid
        await world.stop("hub")


async def test_a_paused_squatter_on_the_moved_identity_holds_nothing_hostage(
    world: World, tmp_path: Path
) -> None:
    """A tenant of the target who knows the victim's uid creates, before the move, an older RKCP
    claiming it, paused (so the hub never stamps it): no claim, the move takes over."""
    world.start_hub()
    world.start_agent()
    await create_pair(world)
    first_uid = (await until_ready(world))["metadata"]["uid"]
    async with open_kube(tmp_path) as target:
        await target.create(resources.SITE, site_obj(SITE, GRANT))
        cl = await target.create(resources.CLUSTER, cluster_obj("a-squat-cluster"), namespace="default")
        squat = rkcp_obj("a-squat", cluster=cl, tenantControlPlaneName="other")
        squat["metadata"]["annotations"] = {
            api.OWNER_UID_ANNOTATION: first_uid,
            cluster.PAUSED_ANNOTATION: "",
        }
        await target.create(RKCP, squat, namespace="default")
        await moving.move(world.mgmt, target, namespace="default", cluster="cp1-cluster")
        await _hand_over(world, target)
        await _resumed(world, target, first_uid)
        left = await target.get(RKCP, "a-squat", namespace="default")
        assert vocabulary.FINALIZER not in (left["metadata"].get("finalizers") or ())
        await world.stop("hub")


async def test_a_hand_set_owner_identity_takes_nothing(world: World) -> None:
    world.start_hub()
    world.start_agent()
    await create_pair(world)
    victim = await until_ready(world)
    identity = victim["metadata"]["uid"]
    # The same coordinates with the victim's identity, at creation: stamped with its own uid, and
    # the conflict index refuses the younger claim. Created with the hub's finalizer too (as if
    # moved): the identity is refused (it is a still existing RKCP's).
    thief = rkcp_obj("thief", cluster=await _cluster(world, "thief"), tenantControlPlaneName="cp1")
    thief["metadata"]["annotations"] = {api.OWNER_UID_ANNOTATION: identity}
    await world.mgmt.create(RKCP, thief, namespace="default")
    bold = rkcp_obj("bold", cluster=await _cluster(world, "bold"), tenantControlPlaneName="cp1")
    bold["metadata"].update(
        annotations={api.OWNER_UID_ANNOTATION: identity}, finalizers=[vocabulary.FINALIZER]
    )
    await world.mgmt.create(RKCP, bold, namespace="default")
    # Other coordinates, a copy of the victim's manifest: its own owner from the first reconcile.
    copy = rkcp_obj("copy", cluster=await _cluster(world, "copy"))
    copy["metadata"]["annotations"] = {api.OWNER_UID_ANNOTATION: identity}
    created = await world.mgmt.create(RKCP, copy, namespace="default")
    await helpers.eventually(
        lambda: world.rkcp("thief"), lambda o: condition(o, "Ready") == ("False", "Conflict"), within=20
    )
    stamped = await world.rkcp("thief")
    assert stamped is not None
    assert stamped["metadata"]["annotations"][api.OWNER_UID_ANNOTATION] == stamped["metadata"]["uid"]
    refused = await helpers.eventually(
        lambda: world.rkcp("bold"), lambda o: condition(o, "Ready") == ("False", "NotAuthorized"), within=20
    )
    assert "is RKCP default/cp1's" in str(refused)
    await until_ready(world, "copy")
    copied = await world.rkcp("copy")
    assert copied is not None
    assert copied["metadata"]["annotations"][api.OWNER_UID_ANNOTATION] == created["metadata"]["uid"]
    owners = {i.name: i.owner.uid for i in await world.intents()}
    assert owners == {"cp1": identity, "copy": created["metadata"]["uid"]}
    # Nothing of the victim's reached the thief.
    assert (
        await world.mgmt.get_or_none(resources.SECRET, "thief-cluster-kubeconfig", namespace="default")
        is None
    )
    kc = await world.mgmt.get(resources.SECRET, "cp1-cluster-kubeconfig", namespace="default")
    assert [o["name"] for o in kc["metadata"]["ownerReferences"]] == ["cp1"]
