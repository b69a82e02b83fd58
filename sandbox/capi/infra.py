"""A test stand-in for an infrastructure provider: ``StandInCluster`` objects called provisioned
once their control plane's endpoint is known.

Cluster API's Cluster controller waits for its InfraCluster's ``status.initialization.provisioned``
(the v1beta2 contract) and mirrors its ``Ready`` condition into ``InfrastructureReady``; an
infrastructure provider of an externally managed control plane waits for the control-plane
provider (here the hub) to fill ``spec.controlPlaneEndpoint``. ``provisioned`` is that decision
(pure: the status patch, or None); ``run`` lists the StandInClusters every ``interval`` and
patches each one's status. It provisions nothing. ``python -m sandbox.capi.infra --kubeconfig K``
runs it until SIGTERM (``sandbox.launcher`` starts it beside Cluster API's manager).

``with_infrastructure`` and ``in_class`` (pure) put the stand-in where the release's templates
ask a user for their workers' infrastructure: a generated Cluster's ``infrastructureRef`` and
the ClusterClass's InfraCluster template (CAPD's there).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import logging
import signal
from collections.abc import Mapping
from typing import Any, Final

from common import aiotasks, kube
from common.kube import errors as kerrors
from common.kube import resources

__all__ = ["STAND_IN_CLUSTER", "in_class", "provisioned", "run", "with_infrastructure"]

STAND_IN_CLUSTER: Final = resources.Resource(
    "infrastructure.cluster.x-k8s.io", "v1beta2", "standinclusters", "StandInCluster"
)
STAND_IN_TEMPLATE_KIND: Final = "StandInClusterTemplate"
INFRASTRUCTURE_GROUP: Final = "infrastructure.cluster.x-k8s.io"
INTERVAL: Final = 0.5


def with_infrastructure(
    documents: list[dict[str, Any]], *, name: str, namespace: str
) -> list[dict[str, Any]]:
    """``documents`` (a generated cluster template) with their Cluster's ``infrastructureRef``
    naming a StandInCluster ``name``, and that StandInCluster added."""
    ref = {"apiVersion": STAND_IN_CLUSTER.api_version, "kind": STAND_IN_CLUSTER.kind, "name": name}
    out = []
    for doc in documents:
        if doc.get("kind") == "Cluster":
            doc = {**doc, "spec": {**doc.get("spec", {}), "infrastructureRef": ref}}
        out.append(doc)
    made = {
        "apiVersion": ref["apiVersion"],
        "kind": ref["kind"],
        "metadata": {"name": name, "namespace": namespace},
    }
    return [*out, made]


def _stand_in_template(ref: dict[str, Any]) -> dict[str, Any]:
    """An InfraCluster template (reference) of another provider → the stand-in's; anything
    else (a machine template of the workers, say) as it is."""
    group_of = str(ref.get("apiVersion", "")).startswith(f"{INFRASTRUCTURE_GROUP}/")
    if not group_of or not str(ref.get("kind", "")).endswith("ClusterTemplate"):
        return ref
    return {**ref, "apiVersion": STAND_IN_CLUSTER.api_version, "kind": STAND_IN_TEMPLATE_KIND}


def in_class(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ClusterClass file's ``documents`` with the stand-in's InfraCluster template where they
    name another provider's (the class's ``spec.infrastructure`` reference and the template);
    workers' machine templates are left as they are."""
    out = []
    for doc in documents:
        if doc.get("kind") == "ClusterClass":
            infrastructure = dict(doc["spec"]["infrastructure"])
            for key in ("ref", "templateRef"):  # v1beta1's name, v1beta2's
                if key in infrastructure:
                    infrastructure[key] = _stand_in_template(infrastructure[key])
            doc = {**doc, "spec": {**doc["spec"], "infrastructure": infrastructure}}
        elif _stand_in_template(doc) is not doc:
            doc = {**_stand_in_template(doc), "spec": {"template": {"spec": {}}}}
        out.append(doc)
    return out


def provisioned(obj: Mapping[str, Any], *, now: str) -> dict[str, Any] | None:
    """The status patch calling ``obj`` provisioned, or None: already so, or no endpoint yet."""
    endpoint = (obj.get("spec") or {}).get("controlPlaneEndpoint") or {}
    if not endpoint.get("host") or not endpoint.get("port"):
        return None
    status = obj.get("status") or {}
    ready = [c for c in status.get("conditions") or () if c.get("type") == "Ready"]
    if (status.get("initialization") or {}).get("provisioned") is True and [
        c.get("status") for c in ready
    ] == ["True"]:
        return None
    generation = (obj.get("metadata") or {}).get("generation")
    condition = {
        "type": "Ready",
        "status": "True",
        "reason": "Provisioned",
        "message": "",
        "lastTransitionTime": now,
        **({"observedGeneration": generation} if generation else {}),
    }
    return {"status": {"initialization": {"provisioned": True}, "conditions": [condition]}}


async def run(k: kube.Kube, *, stop: asyncio.Event, interval: float = INTERVAL) -> None:
    """Every StandInCluster with an endpoint called provisioned, until ``stop``."""
    log = logging.getLogger(__name__)
    while not stop.is_set():
        try:
            items = (await k.list(STAND_IN_CLUSTER)).items
        except kerrors.KubeError as exc:
            log.warning("cannot list StandInClusters: %s", exc)
            items = []
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for obj in items:
            patch = provisioned(obj, now=now)
            if patch is None:
                continue
            meta = obj["metadata"]
            # Gone meanwhile, or refused: the next pass tries again.
            with contextlib.suppress(kerrors.KubeError):
                await k.patch(
                    STAND_IN_CLUSTER, meta["name"], patch, namespace=meta["namespace"], subresource="status"
                )
                log.info("StandInCluster %s/%s provisioned", meta["namespace"], meta["name"])
        await aiotasks.wait_event(stop, interval)


async def _main(kubeconfig: str) -> None:
    api_client = await kube.api_client_from_kubeconfig(kubeconfig)
    try:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        logging.getLogger(__name__).info("stand-in infrastructure provider running against %s", kubeconfig)
        await run(kube.Kube(api_client), stop=stop)
    finally:
        await api_client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m sandbox.capi.infra", description=__doc__)
    parser.add_argument("--kubeconfig", required=True, help="kubeconfig of the management cluster")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(_main(parser.parse_args().kubeconfig))
