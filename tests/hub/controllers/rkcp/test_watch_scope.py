"""The hub's --namespace and --watch-filter, as Cluster API providers have them: an RKCP outside
the namespace, or without the label, is left alone (no finalizer, no status, no intent); one
inside is reconciled to Ready. Emulated management cluster, real NATS, the real agent loops.

"Left alone" is checked once the watched RKCP, created after the other, is Ready: the hub's watch
delivers both in order, so a hub that watched the other would have written to it by then.
"""

from __future__ import annotations

from typing import Any

from common.kube import resources
from hub.api import cluster as cluster_api
from hub.reconcile.rkcp import vocabulary
from tests import helpers
from tests.hub.conftest import RKCP, World, cluster_obj, condition, rkcp_obj, until_ready

BLUE = {cluster_api.WATCH_FILTER_LABEL: "blue"}


async def _pair(
    w: World, name: str, *, namespace: str = "default", labels: dict[str, str] | None = None
) -> None:
    cluster = cluster_obj(f"{name}-cluster", namespace=namespace)
    cluster["metadata"]["labels"] = dict(labels or {})
    cl = await w.mgmt.create(resources.CLUSTER, cluster, namespace=namespace)
    obj = rkcp_obj(name, cluster=cl, namespace=namespace)
    obj["metadata"]["labels"] = dict(labels or {})
    await w.mgmt.create(RKCP, obj, namespace=namespace)


async def _untouched(w: World, name: str, *, namespace: str = "default") -> dict[str, Any]:
    obj = await w.mgmt.get(RKCP, name, namespace=namespace)
    assert vocabulary.FINALIZER not in (obj["metadata"].get("finalizers") or []), name
    assert not obj.get("status"), f"{name} has a status: {obj.get('status')}"
    assert name not in {i.owner.name for i in await w.intents()}
    return obj


async def test_namespace_watches_only_its_namespace(world: World) -> None:
    await world.mgmt.create(resources.NAMESPACE, {"metadata": {"name": "elsewhere"}})
    world.start_hub(namespaces=("default",))
    world.start_agent()
    await _pair(world, "outside", namespace="elsewhere")
    await _pair(world, "inside")
    await until_ready(world, "inside")
    await _untouched(world, "outside", namespace="elsewhere")
    assert [i.owner.name for i in await world.intents()] == ["inside"]


async def test_watch_filter_reconciles_only_labelled_objects(world: World) -> None:
    world.start_hub(watch_filter="blue")
    world.start_agent()
    await _pair(world, "unlabelled")
    await _pair(world, "other-value", labels={cluster_api.WATCH_FILTER_LABEL: "green"})
    await _pair(world, "labelled", labels=BLUE)
    await until_ready(world, "labelled")
    await _untouched(world, "unlabelled")
    await _untouched(world, "other-value")
    # Labelled later (the Cluster too, as CAPI asks), it is watched from then on.
    patch = {"metadata": {"labels": BLUE}}
    await world.mgmt.patch(resources.CLUSTER, "unlabelled-cluster", patch, namespace="default")
    await world.mgmt.patch(RKCP, "unlabelled", patch, namespace="default")
    await until_ready(world, "unlabelled")
    owners = sorted(i.owner.name for i in await world.intents())
    assert owners == ["labelled", "unlabelled"]


async def test_a_labelled_rkcp_whose_cluster_is_not_labelled_waits_for_it(world: World) -> None:
    world.start_hub(watch_filter="blue")
    cl = await world.mgmt.create(resources.CLUSTER, cluster_obj("bare-cluster"), namespace="default")
    obj = rkcp_obj("half", cluster=cl)
    obj["metadata"]["labels"] = BLUE
    await world.mgmt.create(RKCP, obj, namespace="default")

    async def ready() -> tuple[str, str]:
        return condition(await world.rkcp("half"), "Ready")

    await helpers.eventually(ready, lambda r: r == ("False", "WaitingForCluster"), within=20)
    assert await world.intents() == []
