"""A deletion the site-unavailable timeout released, end to end in one process:
the hub's controller on an emulated management cluster, the real agent loops at an emulated
site with the Kamaji simulator, a real nats-server between them.

The site goes dark (the agent's tasks are cancelled: no heartbeat, no consumer), an RKCP with a
short ``siteUnavailableDeletionTimeout`` is deleted and released; then either the site comes
back (the delete is applied and every subject of the control plane is purged), or the same
Cluster and RKCP are created again first (the new owner's provision names the released
owner, the agent replaces the old TCP with the new one, nothing of the old owner is left).
"""

from __future__ import annotations

from typing import Any

from common import bus
from common.kube import resources
from protocol import messages, streams, subjects
from tests import helpers
from tests.hub.conftest import RKCP, SITE, World, condition, create_pair, until_ready

TCP = resources.TENANT_CONTROL_PLANE
KINDS = (subjects.Kind.INTENT, subjects.Kind.STATUS, subjects.Kind.SECRET)


async def stored(w: World, name: str = "cp1") -> dict[subjects.Kind, bus.StoredMessage | None]:
    """The last message on each subject of the control plane ``tenants/<name>`` at site-a."""
    return {
        kind: await bus.last_message(
            w.conn,
            streams.stream_name(kind, site=SITE, prefix=w.prefix),
            subjects.control_plane(kind, SITE, "tenants", name, prefix=w.prefix),
        )
        for kind in KINDS
    }


def owner_of(kind: subjects.Kind, message: bus.StoredMessage) -> str:
    if kind is subjects.Kind.INTENT:
        return messages.decode_intent(message.data).owner.uid
    if kind is subjects.Kind.STATUS:
        return messages.decode_status(message.data).owner_uid
    return messages.decode_sealed_secrets(message.data).owner_uid


async def release_while_dark(w: World) -> str:
    """A Ready cp1 whose deletion the timeout released while its site was dark; its uid."""
    await create_pair(w, siteUnavailableDeletionTimeout="1s")
    obj = await until_ready(w)
    await w.stop("agent")
    await w.mgmt.delete(RKCP, "cp1", namespace="default")
    await w.mgmt.delete(resources.CLUSTER, "cp1-cluster", namespace="default")

    async def released() -> bool:
        return await w.rkcp() is None

    await helpers.eventually(released, within=30)
    return str(obj["metadata"]["uid"])


async def test_a_released_deletion_is_purged_once_the_site_confirms(world: World) -> None:
    world.start_hub()
    world.start_agent()
    await release_while_dark(world)
    assert (await stored(world))[subjects.Kind.INTENT] is not None  # the delete waits for the site
    world.start_agent()

    async def purged() -> bool:
        left = await stored(world)
        tcp = await world.site.get_or_none(TCP, "cp1", namespace="tenants")
        return tcp is None and all(m is None for m in left.values())

    await helpers.eventually(purged, within=30)
    sample = world.hub_metrics.registry.get_sample_value
    assert sample("kb_hub_released_deletions_purged_total") == 1.0
    assert sample("kb_hub_released_deletions_pending") == 0.0


async def test_recreated_under_the_same_name_replaces_the_released_owners_tcp(world: World) -> None:
    world.start_hub()
    world.start_agent()
    old_uid = await release_while_dark(world)
    old_tcp = await world.site.get(TCP, "cp1", namespace="tenants")
    # CAPI users recreate the cluster before the site returns.
    _, new = await create_pair(world, siteUnavailableDeletionTimeout="1s")
    new_uid = new["metadata"]["uid"]
    assert new_uid != old_uid

    async def replacing() -> bool:
        return condition(await world.rkcp(), "TenantControlPlaneReady") == ("False", "ReplacingPreviousOwner")

    await helpers.eventually(replacing, within=20)
    world.start_agent()
    obj = await until_ready(world)
    assert condition(obj, "TenantControlPlaneReady")[0] == "True"
    tcp = await world.site.get(TCP, "cp1", namespace="tenants")
    assert tcp["metadata"]["uid"] != old_tcp["metadata"]["uid"]
    assert tcp["metadata"]["annotations"]["kamaji-broker.io/owner-uid"] == new_uid

    async def nothing_of_the_old_owner() -> bool:
        left = await stored(world)
        return all(m is None or owner_of(k, m) != old_uid for k, m in left.items())

    await helpers.eventually(nothing_of_the_old_owner, within=20)
    events = await world.mgmt.list(resources.EVENT, namespace="default")
    reasons: set[Any] = {e["reason"] for e in events.items}
    assert "ReplacingPreviousOwner" in reasons


async def test_a_restarted_hub_finds_the_released_deletion_in_the_stream_and_purges_it(world: World) -> None:
    world.start_hub()
    world.start_agent()
    await release_while_dark(world)
    # The process that released it is gone: what remains is the delete intent in the stream.
    await world.stop("hub")
    controller = world.start_hub()

    async def found() -> bool:
        return len(controller.released) == 1

    await helpers.eventually(found, within=20)
    world.start_agent()

    async def purged() -> bool:
        left = await stored(world)
        tcp = await world.site.get_or_none(TCP, "cp1", namespace="tenants")
        return tcp is None and all(m is None for m in left.values()) and not len(controller.released)

    await helpers.eventually(purged, within=30)
