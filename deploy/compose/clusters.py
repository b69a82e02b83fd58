"""The compose ``clusters`` service: emulated management and site clusters plus Kamaji simulators.

One process, standing in for real clusters in the compose topology:

- an emulated API server per cluster on 127.0.0.1 (``mgmt`` on ``--port`` with the RKCP and CAPI
  Cluster CRDs, site number ``i`` on ``--port + 1 + i`` with Kamaji's TenantControlPlane CRD),
  each with its kubeconfig ``DIR/<cluster>.kubeconfig``;
- the target namespace at every site and a Kamaji simulator per site (its own endpoint pool);
- ``DIR/ready`` once all of it serves (the compose healthcheck), removed at start.

The emulators listen on ``--address`` or ``KB_CLUSTERS_ADDRESS`` (127.0.0.1 by default; compose
gives 0.0.0.0 inside the container so that its published ports reach them,
docker-compose.host.yml 127.0.0.1 again); the
kubeconfigs name 127.0.0.1, where the hub, the agents and the e2e checks (which join this
service's network namespace, ``network_mode: service:clusters``) and kubectl on the host find
them. Runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from common import kube
from common.kube import errors as kerrors
from common.kube import resources
from hub.api import crds as crdgen
from sandbox import crds
from sandbox.kamaji import simulator
from sandbox.kubeapi.server import Server

log = logging.getLogger("clusters")

MGMT = "mgmt"
READY_FILE = "ready"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="clusters.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", required=True, type=Path, help="where the kubeconfigs are written")
    p.add_argument("--sites", required=True, help="comma-separated site names")
    p.add_argument("--namespace", default="tenants", help="target namespace created at every site")
    p.add_argument("--port", type=int, default=6443, help="mgmt's port; site i gets port+1+i")
    p.add_argument(
        "--site-manifests",
        type=Path,
        help="a directory of <site>.site.yaml (kamaji-broker site add): each Site is created in "
        "mgmt, the operator's `kubectl apply -f` (in operator mode an agent bootstraps only for a Site)",
    )
    p.add_argument(
        "--address",
        default=os.environ.get("KB_CLUSTERS_ADDRESS", "127.0.0.1"),
        help="the address the API servers listen on (env KB_CLUSTERS_ADDRESS)",
    )
    p.add_argument("--kamaji-delay", type=float, default=2.0, help="seconds until a TCP is Ready")
    return p


def address_pool(index: int) -> str:
    return str(ipaddress.ip_network(f"10.{index + 1}.0.0/16"))


def prepare(directory: Path) -> list[Path]:
    """Create ``directory``, forget an earlier run's readiness, write the RKCP and Site CRDs."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / READY_FILE).unlink(missing_ok=True)
    rkcp_crd = directory / crdgen.FILENAME
    rkcp_crd.write_text(crdgen.render())
    site_crd = directory / crdgen.SITE_FILENAME
    site_crd.write_text(crdgen.render_site())
    return [rkcp_crd, site_crd]


async def run(args: argparse.Namespace, stop: asyncio.Event) -> None:
    sites = [s.strip() for s in args.sites.split(",") if s.strip()]
    directory: Path = args.dir
    our_crds = await asyncio.to_thread(prepare, directory)

    servers: dict[str, Server] = {MGMT: Server(MGMT)}
    servers[MGMT].apply_crd_files([*map(str, our_crds), str(crds.CLUSTER)])
    for site in sites:
        servers[site] = Server(site)
        servers[site].apply_crd_files([str(crds.TENANT_CONTROL_PLANE)])
    api_clients: list[Any] = []
    async with contextlib.AsyncExitStack() as stack:
        for index, (name, server) in enumerate(servers.items()):
            await server.start(port=args.port + index, host=args.address)
            stack.push_async_callback(server.stop)
            server.write_kubeconfig(directory / f"{name}.kubeconfig")
            log.info("cluster %s at %s", name, server.url)
        if args.site_manifests is not None:
            await _apply_sites(directory / f"{MGMT}.kubeconfig", args.site_manifests)
        for index, site in enumerate(sites):
            api_client = await kube.api_client_from_kubeconfig(directory / f"{site}.kubeconfig")
            api_clients.append(api_client)
            stack.push_async_callback(api_client.close)
            with contextlib.suppress(kerrors.Conflict):
                await kube.Kube(api_client).create(
                    resources.NAMESPACE, {"metadata": {"name": args.namespace}}
                )
            sim = simulator.Simulator(
                api_client, ready_delay=args.kamaji_delay, address_pool=address_pool(index)
            )
            await stack.enter_async_context(sim)
            log.info("kamaji simulator for %s running", site)
        await asyncio.to_thread((directory / READY_FILE).write_text, "\n".join(servers) + "\n")
        log.info("clusters ready: %s", ", ".join(servers))
        await stop.wait()
        await asyncio.to_thread((directory / READY_FILE).unlink, missing_ok=True)


def _read_sites(manifests: Path) -> list[dict[str, Any]]:
    return [yaml.safe_load(path.read_text()) for path in sorted(manifests.glob("*.site.yaml"))]


async def _apply_sites(kubeconfig: Path, manifests: Path) -> None:
    api_client = await kube.api_client_from_kubeconfig(kubeconfig)
    try:
        for body in await asyncio.to_thread(_read_sites, manifests):
            with contextlib.suppress(kerrors.Conflict):
                await kube.Kube(api_client).create(resources.SITE, body)
            log.info("Site %s created", body["metadata"]["name"])
    finally:
        await api_client.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def _main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run(args, stop)

    asyncio.run(_main())
    return 0


if __name__ == "__main__":
    sys.exit(main())
