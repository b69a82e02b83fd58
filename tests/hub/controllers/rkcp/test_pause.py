"""Pause as Cluster API defines it, end to end: the hub's controller on an emulated
management cluster, a real nats-server, the real agent loops at an emulated site.

A paused RKCP (the ``cluster.x-k8s.io/paused`` annotation on it, or its Cluster's
``spec.paused``) gets no finalizer and publishes nothing; one deleted while paused keeps its
finalizer and publishes no delete intent (the intent stream is read to prove it) until it is
unpaused, and then goes as any other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from common.kube import resources
from hub.api import cluster
from hub.reconcile.rkcp import vocabulary
from protocol import messages
from tests import helpers
from tests.hub.conftest import RKCP, SITE, World, cluster_obj, condition, create_pair, rkcp_obj, until_ready

TCP = resources.TENANT_CONTROL_PLANE
PAUSE = {"metadata": {"annotations": {cluster.PAUSED_ANNOTATION: ""}}}
UNPAUSE = {"metadata": {"annotations": {cluster.PAUSED_ANNOTATION: None}}}


BOTH = (
    "Cluster spec.paused is set to true, RemoteKamajiControlPlane has the cluster.x-k8s.io/paused annotation"
)


def _paused_by(message: str) -> Callable[[dict[str, Any] | None], bool]:
    """The object's Paused condition is True with ``message`` (CAPI's, naming each cause)."""

    def check(obj: dict[str, Any] | None) -> bool:
        found = [
            c for c in ((obj or {}).get("status") or {}).get("conditions") or () if c["type"] == "Paused"
        ]
        return bool(found) and (found[0]["status"], found[0]["message"]) == ("True", message)

    return check


def _published(w: World, op: str) -> float:
    found = w.hub_metrics.registry.get_sample_value(
        "kb_hub_intents_published_total", {"site": SITE, "op": op}
    )
    return found or 0.0


def _ops(intents: list[messages.Intent]) -> list[tuple[str, str]]:
    return [(i.op, i.name) for i in intents]


async def test_a_paused_rkcp_being_deleted_publishes_nothing_until_unpaused(world: World) -> None:
    world.start_hub()
    world.start_agent()
    await create_pair(world)
    await until_ready(world)
    provisioned = await world.intents()
    assert _ops(provisioned) == [("provision", "cp1")]
    seq = await world.last_intent_seq()

    await world.mgmt.patch(RKCP, "cp1", PAUSE, namespace="default")
    await helpers.eventually(
        lambda: world.rkcp(), lambda o: condition(o, "Paused") == ("True", "Paused"), within=20, what="Paused"
    )
    await world.mgmt.delete(RKCP, "cp1", namespace="default")

    def waits_paused(obj: dict[str, Any] | None) -> bool:
        return condition(obj, "Deleting") == ("True", "Paused")

    # The hub reconciled the deletion while paused (the status says so) ...
    obj = await helpers.eventually(lambda: world.rkcp(), waits_paused, within=20, what="Deleting=Paused")
    assert obj is not None and vocabulary.FINALIZER in obj["metadata"]["finalizers"]
    # ... and put nothing on the bus: the intent stream holds the provision intent, unchanged.
    assert await world.intents() == provisioned and await world.last_intent_seq() == seq
    assert _published(world, "delete") == 0.0
    assert await world.site.get_or_none(TCP, "cp1", namespace="tenants") is not None

    # Unpaused, the deletion proceeds: the delete intent goes, the site deletes, the finalizer goes.
    await world.mgmt.patch(RKCP, "cp1", UNPAUSE, namespace="default")

    async def gone() -> bool:
        return await world.rkcp() is None

    await helpers.eventually(gone, within=30, what="cp1 deleted")
    assert await world.site.get_or_none(TCP, "cp1", namespace="tenants") is None
    assert _published(world, "delete") == 1.0


async def test_a_paused_rkcp_gets_no_finalizer_and_publishes_nothing_until_unpaused(world: World) -> None:
    world.start_hub()
    world.start_agent()
    cl = await world.mgmt.create(resources.CLUSTER, cluster_obj("held", paused=True), namespace="default")
    body = rkcp_obj("held", cluster=cl)
    body["metadata"]["annotations"] = {cluster.PAUSED_ANNOTATION: ""}
    await world.mgmt.create(RKCP, body, namespace="default")

    # CAPI's message names both causes (once the Cluster is seen: until then, the annotation).
    obj = await helpers.eventually(lambda: world.rkcp("held"), _paused_by(BOTH), within=20, what="Paused")
    assert obj is not None
    assert vocabulary.FINALIZER not in (obj["metadata"].get("finalizers") or [])
    assert condition(obj, "Available")[1] == "NotAvailable"
    assert await world.intents() == []
    # Both causes must go: the annotation alone lifted, the Cluster still pauses it.
    await world.mgmt.patch(RKCP, "held", UNPAUSE, namespace="default")

    obj = await helpers.eventually(
        lambda: world.rkcp("held"), _paused_by("Cluster spec.paused is set to true"), within=20
    )
    assert obj is not None and vocabulary.FINALIZER not in (obj["metadata"].get("finalizers") or [])
    assert await world.intents() == []
    await world.mgmt.patch(resources.CLUSTER, "held", {"spec": {"paused": False}}, namespace="default")
    obj = await until_ready(world, "held")
    assert vocabulary.FINALIZER in obj["metadata"]["finalizers"]
    assert condition(obj, "Paused") == ("False", "NotPaused")
    assert _ops(await world.intents()) == [("provision", "held")]
