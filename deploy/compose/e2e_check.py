"""The compose ``e2e`` service: end-to-end checks against the running compose topology.

For every site: hub and agent ready (``/readyz``); its ``Site`` granting ``default`` the target
namespace (created or updated, as the operator would); a CAPI Cluster + RemoteKamajiControlPlane
placed there becomes Ready, its ``<cluster>-kubeconfig`` Secret appears in the management
cluster and its TenantControlPlane at the site; deleting them removes the TCP at the site and
the RKCP (finalizer released). Prints one line per step; exit code 0 when every check passed,
1 otherwise (with what was last seen).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from common import kube
from common.kube import errors as kerrors
from common.kube import resources
from hub.api import site as site_api

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
CLUSTER = resources.CLUSTER
TCP = resources.TENANT_CONTROL_PLANE
SECRET = resources.SECRET


class CheckFailed(Exception):
    pass


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="e2e_check.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig-dir", required=True, type=Path, help="DIR/<cluster>.kubeconfig")
    p.add_argument("--sites", required=True, help="comma-separated site names")
    p.add_argument("--namespace", default="tenants", help="target namespace at the sites")
    p.add_argument("--health", action="append", default=[], help="a base URL whose /readyz must be 200")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per step")
    return p


def readyz(url: str) -> tuple[bool, str]:
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/readyz", timeout=5) as response:
            return response.status == 200, response.read().decode()
    except urllib.error.HTTPError as exc:
        return False, exc.read().decode()
    except OSError as exc:
        return False, str(exc)


async def eventually(what: str, probe: Callable[[], Awaitable[tuple[bool, str]]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        ok, seen = await probe()
        if ok:
            print(f"ok   {what}", flush=True)
            return
        await asyncio.sleep(0.5)
    raise CheckFailed(f"{what}: not within {timeout:g}s; last seen: {seen}")


def cluster_body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": CLUSTER.api_version,
        "kind": CLUSTER.kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "clusterNetwork": {"services": {"cidrBlocks": ["10.96.0.0/16"]}},
            "controlPlaneRef": {"apiVersion": RKCP.api_version, "kind": RKCP.kind, "name": name},
        },
    }


def rkcp_body(name: str, *, cluster_uid: str, site: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": RKCP.api_version,
        "kind": RKCP.kind,
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"cluster.x-k8s.io/cluster-name": name},
            "ownerReferences": [
                {"apiVersion": CLUSTER.api_version, "kind": CLUSTER.kind, "name": name, "uid": cluster_uid}
            ],
        },
        "spec": {"site": site, "targetNamespace": namespace, "version": "v1.31.0", "replicas": 1},
    }


async def check_site(
    site: str, *, mgmt: kube.Kube, at_site: kube.Kube, namespace: str, timeout: float
) -> None:
    name = f"e2e-{site}"
    # The operator's placement step: the Site lets namespace default place control planes in
    # the target namespace (what `kamaji-broker site add --namespaces ... --target-namespaces`
    # writes); without it the RKCP would be NotAuthorized.
    grant = site_api.Placement(namespaces=["default"], target_namespaces=[namespace])
    try:
        await mgmt.create(resources.SITE, site_api.manifest(site, placements=[grant]))
    except kerrors.Conflict:
        await mgmt.patch(resources.SITE, site, {"spec": {"placements": [grant.to_dict()]}})
    for old in (RKCP, CLUSTER):  # a previous run's leftovers
        await mgmt.delete(old, name, namespace="default")
    await eventually(f"{site}: no leftover RKCP {name}", lambda: _gone(mgmt, RKCP, name, "default"), timeout)
    cluster = await mgmt.create(CLUSTER, cluster_body(name), namespace="default")
    body = rkcp_body(name, cluster_uid=cluster["metadata"]["uid"], site=site, namespace=namespace)
    await mgmt.create(RKCP, body, namespace="default")
    print(f"...  {site}: created Cluster and RemoteKamajiControlPlane default/{name}", flush=True)

    async def rkcp_ready() -> tuple[bool, str]:
        obj = await mgmt.get_or_none(RKCP, name, namespace="default")
        status = (obj or {}).get("status") or {}
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
        return status.get("ready") is True, f"ready={status.get('ready')} conditions={conditions}"

    async def kubeconfig_secret() -> tuple[bool, str]:
        found = await mgmt.get_or_none(SECRET, f"{name}-kubeconfig", namespace="default")
        return found is not None and bool((found.get("data") or {}).get("value")), str(found is not None)

    async def tcp_ready() -> tuple[bool, str]:
        tcp = await at_site.get_or_none(TCP, name, namespace=namespace)
        labels = ((tcp or {}).get("metadata") or {}).get("labels") or {}
        return tcp is not None and labels.get("kamaji-broker.io/site") == site, f"labels={labels}"

    await eventually(f"{site}: RKCP {name} Ready", rkcp_ready, timeout)
    await eventually(
        f"{site}: Secret {name}-kubeconfig in the management cluster", kubeconfig_secret, timeout
    )
    await eventually(f"{site}: TenantControlPlane {namespace}/{name} at the site", tcp_ready, timeout)

    # As CAPI deletes: the control plane first, while its Cluster still exists (the Cluster's
    # finalizer keeps it until the control plane is gone), then the Cluster.
    await mgmt.delete(RKCP, name, namespace="default")
    await eventually(
        f"{site}: TenantControlPlane deleted at the site",
        lambda: _gone(at_site, TCP, name, namespace),
        timeout,
    )
    await eventually(
        f"{site}: RKCP {name} gone (finalizer released)", lambda: _gone(mgmt, RKCP, name, "default"), timeout
    )
    await mgmt.delete(CLUSTER, name, namespace="default")


async def _gone(client: kube.Kube, r: resources.Resource, name: str, namespace: str) -> tuple[bool, str]:
    obj = await client.get_or_none(r, name, namespace=namespace)
    return obj is None, "still there" if obj else "gone"


async def run(args: argparse.Namespace) -> None:
    sites = [s.strip() for s in args.sites.split(",") if s.strip()]
    for url in args.health:

        async def probe(url: str = url) -> tuple[bool, str]:
            return await asyncio.to_thread(readyz, url)

        await eventually(f"{url}/readyz", probe, args.timeout)
    clients = []
    try:
        mgmt_client = await kube.api_client_from_kubeconfig(args.kubeconfig_dir / "mgmt.kubeconfig")
        clients.append(mgmt_client)
        for site in sites:
            site_client = await kube.api_client_from_kubeconfig(args.kubeconfig_dir / f"{site}.kubeconfig")
            clients.append(site_client)
            await check_site(
                site,
                mgmt=kube.Kube(mgmt_client),
                at_site=kube.Kube(site_client),
                namespace=args.namespace,
                timeout=args.timeout,
            )
    finally:
        for client in clients:
            await client.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        asyncio.run(run(args))
    except CheckFailed as exc:
        print(f"FAIL {exc}", flush=True)
        return 1
    print("e2e: every check passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
