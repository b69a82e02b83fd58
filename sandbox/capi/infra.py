"""A test stand-in for an infrastructure provider: ``StandInCluster`` objects called provisioned
once their control plane's endpoint is known.

Cluster API's Cluster controller waits for its InfraCluster's ``status.initialization.provisioned``
(the v1beta2 contract) and mirrors its ``Ready`` condition into ``InfrastructureReady``; an
infrastructure provider of an externally managed control plane waits for the control-plane
provider (here the hub) to fill ``spec.controlPlaneEndpoint``. ``provisioned`` is that decision
(pure: the status patch, or None); ``run`` lists the StandInClusters every ``interval`` and
patches each one's status. It provisions nothing. ``python -m sandbox.capi.infra --kubeconfig K``
runs it until SIGTERM (``sandbox.launcher`` starts it beside Cluster API's manager).
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

__all__ = ["STAND_IN_CLUSTER", "provisioned", "run"]

STAND_IN_CLUSTER: Final = resources.Resource(
    "infrastructure.cluster.x-k8s.io", "v1beta2", "standinclusters", "StandInCluster"
)
INTERVAL: Final = 0.5


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
