"""The invariants every fault scenario ends with (issue 11), read from the running topology.

``violations`` lists, one line each, what does not hold now; a converged topology has none:

- every live RKCP is Ready, with a TCP at its site owned by it and matching its spec;
- its ``<cluster>-kubeconfig`` holds a client certificate that verifies against ``<cluster>-ca``
  and is the site's current admin kubeconfig;
- every RKCP the scenario deleted is gone, and so is its TCP;
- no TCP at any site is without a live owner;
- no process of the topology exited.

Scenarios wait for ``converged`` (a condition, never a fixed sleep), then assert ``violations``
is empty so that a failure names what is wrong.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature

from agent import tcps
from common.kube import resources
from hub import mapping
from sandbox.launcher import Topology

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
TCP = resources.TENANT_CONTROL_PLANE
SECRET = resources.SECRET
OWNER_UID = tcps.OWNER_UID

Deleted = tuple[str, str, str]
"""(namespace, name, site) of an RKCP the scenario deleted."""


def conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or ()}


def _b64(secret: dict[str, Any], key: str) -> bytes:
    return base64.b64decode((secret.get("data") or {}).get(key) or "")


def _spec_differs(rkcp: dict[str, Any], tcp: dict[str, Any]) -> str:
    spec, tcp_spec = rkcp["spec"], tcp.get("spec") or {}
    version = (tcp_spec.get("kubernetes") or {}).get("version")
    replicas = ((tcp_spec.get("controlPlane") or {}).get("deployment") or {}).get("replicas")
    want = (mapping.kubernetes_version(spec["version"]), spec.get("replicas", 2))
    return "" if (version, replicas) == want else f"runs {(version, replicas)}, wants {want}"


async def _secrets(world: Topology, rkcp: dict[str, Any], site: str, target: str) -> str:
    namespace, name = rkcp["metadata"]["namespace"], rkcp["metadata"]["name"]
    kubeconfig = await world.mgmt.get_or_none(SECRET, f"{name}-kubeconfig", namespace=namespace)
    ca = await world.mgmt.get_or_none(SECRET, f"{name}-ca", namespace=namespace)
    if kubeconfig is None or ca is None:
        return "CAPI Secrets missing"
    at_site = await world.site_kube(site).get_or_none(SECRET, f"{name}-admin-kubeconfig", namespace=target)
    if at_site is None or _b64(kubeconfig, "value") != _b64(at_site, "admin.conf"):
        return "<cluster>-kubeconfig is not the site's current admin kubeconfig"
    config = yaml.safe_load(_b64(kubeconfig, "value"))
    [user] = config["users"]
    cert = x509.load_pem_x509_certificate(base64.b64decode(user["user"]["client-certificate-data"]))
    try:
        cert.verify_directly_issued_by(x509.load_pem_x509_certificate(_b64(ca, "tls.crt")))
    except (InvalidSignature, ValueError, TypeError) as exc:
        return f"client certificate does not verify against <cluster>-ca: {type(exc).__name__}"
    return ""


async def _live(world: Topology, rkcp: dict[str, Any]) -> list[str]:
    """What is wrong with one live RKCP: not Ready, no TCP, another owner's, other spec, secrets."""
    meta = rkcp["metadata"]
    where = f"RKCP {meta['namespace']}/{meta['name']}"
    site, target = rkcp["spec"]["site"], rkcp["spec"].get("targetNamespace") or world.namespace
    found: list[str] = []
    if conditions(rkcp).get("Ready") != "True":
        ready = [c for c in rkcp.get("status", {}).get("conditions", ()) if c["status"] != "True"]
        found.append(f"{where} not Ready: {[(c['type'], c.get('reason')) for c in ready]}")
    tcp = await world.site_kube(site).get_or_none(TCP, meta["name"], namespace=target)
    if tcp is None:
        return [*found, f"{where} has no TCP at {site}"]
    if tcp["metadata"].get("annotations", {}).get(OWNER_UID) != meta["uid"]:
        found.append(f"{where}: the TCP at {site} belongs to another owner")
    if differs := _spec_differs(rkcp, tcp):
        found.append(f"{where}: the TCP at {site} {differs}")
    if problem := await _secrets(world, rkcp, site, target):
        found.append(f"{where}: {problem}")
    return found


async def _unowned(world: Topology, owners: set[str]) -> list[str]:
    found: list[str] = []
    for site in world.sites:
        for tcp in (await world.site_kube(site).list(TCP)).items:
            meta = tcp["metadata"]
            owner = (meta.get("annotations") or {}).get(OWNER_UID)
            if owner not in owners:
                found.append(f"TCP {meta['namespace']}/{meta['name']} at {site} has no live owner ({owner})")
    return found


async def violations(world: Topology, *, deleted: Iterable[Deleted] = ()) -> list[str]:
    found: list[str] = []
    owners: set[str] = set()
    for rkcp in (await world.mgmt.list(RKCP)).items:
        meta = rkcp["metadata"]
        if meta.get("deletionTimestamp"):
            deleting = conditions(rkcp).get("Deleting")
            found.append(f"RKCP {meta['namespace']}/{meta['name']} is still being deleted ({deleting})")
            continue
        owners.add(meta["uid"])
        found.extend(await _live(world, rkcp))
    for namespace, name, site in deleted:
        if await world.mgmt.get_or_none(RKCP, name, namespace=namespace) is not None:
            found.append(f"deleted RKCP {namespace}/{name} still exists")
        if await world.site_kube(site).get_or_none(TCP, name, namespace=world.namespace) is not None:
            found.append(f"deleted RKCP {namespace}/{name}: its TCP is still at {site}")
    found.extend(await _unowned(world, owners))
    found.extend(world.failures())
    return found


async def converged(world: Topology, *, deleted: Iterable[Deleted] = ()) -> bool:
    return not await violations(world, deleted=tuple(deleted))
