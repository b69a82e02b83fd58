"""The invariants a running system ends with after any fault, read from it.

``findings`` lists what does not hold now, each with its kind; a converged system has none:

- ``stuck``: a live RKCP that is not Ready, or one still being deleted;
- ``lost``: a live RKCP with no TCP at its site, or without its CAPI Secrets;
- ``mismatch``: a TCP of another owner, or one that does not run the RKCP's spec (every field
  the hub's mapping gives for it, and none we applied and no longer want), or a
  ``<cluster>-kubeconfig`` whose client certificate does not verify against ``<cluster>-ca`` or
  is not the site's current admin kubeconfig;
- ``orphaned``: a TCP at a site without a live owner, or the TCP of an RKCP the scenario deleted
  (which must itself be gone);
- ``duplicated``: more than one TCP for one owner;
- ``crashed``: a process of the system exited without an injected fault;
- ``errors``: a line logged at error level since a mark, not explained by an injected cause.

Used by tests/faults (which wait for ``converged``, a condition, never a fixed sleep, then assert
``violations`` is empty so that a failure names what is wrong) and bench/faults.py.
"""

from __future__ import annotations

import base64
import collections
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, Unpack

import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature

from agent.tcp import managed
from common.kube import resources
from hub.api import cluster as cluster_api
from hub.api import rkcp as api
from hub.mapping import tcp as tcp_mapping
from protocol import names
from sandbox.launcher.system import System

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
TCP = resources.TENANT_CONTROL_PLANE
SECRET = resources.SECRET
CLUSTER = resources.CLUSTER
OWNER_UID = managed.OWNER_UID

Deleted = tuple[str, str, str]
"""(namespace, name, site) of an RKCP the scenario deleted."""

Kind = Literal["stuck", "lost", "mismatch", "orphaned", "duplicated", "crashed", "errors"]
KINDS: tuple[Kind, ...] = ("lost", "orphaned", "duplicated", "stuck", "mismatch", "crashed", "errors")


@dataclass(frozen=True)
class Finding:
    kind: Kind
    text: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.text}"


def counts(found: Iterable[Finding]) -> dict[str, int]:
    """How many findings of each kind (every kind present, 0 when none)."""
    by_kind = collections.Counter(f.kind for f in found)
    return {kind: by_kind[kind] for kind in KINDS}


MISSING_SECRETS = "CAPI Secrets missing"


def owner_identity(rkcp: dict[str, Any]) -> str:
    """The owner the site knows an RKCP by: its stamped identity (``hub.reconcile.rkcp.owner``; the
    uid it had before a ``clusterctl move``), or its uid until the hub stamped it."""
    meta = rkcp["metadata"]
    return str((meta.get("annotations") or {}).get(api.OWNER_UID_ANNOTATION) or meta["uid"])


def conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or ()}


def _b64(secret: dict[str, Any], key: str) -> bytes:
    return base64.b64decode((secret.get("data") or {}).get(key) or "")


async def _wanted_spec(world: System, rkcp: dict[str, Any]) -> dict[str, Any]:
    """The TCP spec the hub's mapping gives for ``rkcp`` and its owner Cluster (what it publishes)."""
    model = api.RemoteKamajiControlPlane.parse(rkcp)
    cluster = None
    for ref in model.metadata.owner_references:
        if ref.kind == "Cluster" and ref.api_version.startswith("cluster.x-k8s.io/"):
            found = await world.mgmt.get_or_none(CLUSTER, ref.name, namespace=model.metadata.namespace)
            cluster = cluster_api.Cluster.parse(found) if found is not None else None
    return tcp_mapping.tcp_spec(model, cluster)


def _spec_differs(want: dict[str, Any], tcp: dict[str, Any]) -> str:
    """The fields we own where the TCP does not run ``want`` (a value differs or is missing, or a
    field we applied before and no longer want is still there); Kamaji's own fields are not ours."""
    paths = managed.drift(want, tcp)
    return f"differs from the RKCP's spec at {', '.join(paths)}" if paths else ""


async def _secrets(world: System, rkcp: dict[str, Any], site: str, target: str) -> str:
    namespace, name = rkcp["metadata"]["namespace"], rkcp["metadata"]["name"]
    kubeconfig = await world.mgmt.get_or_none(SECRET, names.capi_kubeconfig(name), namespace=namespace)
    ca = await world.mgmt.get_or_none(SECRET, names.capi_ca(name), namespace=namespace)
    if kubeconfig is None or ca is None:
        return MISSING_SECRETS
    at_site = await world.site_kube(site).get_or_none(SECRET, names.kamaji_kubeconfig(name), namespace=target)
    value = _b64(kubeconfig, names.CAPI_KUBECONFIG_KEY)
    if at_site is None or value != _b64(at_site, names.ADMIN_KUBECONFIG_KEY):
        return "<cluster>-kubeconfig is not the site's current admin kubeconfig"
    config = yaml.safe_load(value)
    [user] = config["users"]
    cert = x509.load_pem_x509_certificate(base64.b64decode(user["user"]["client-certificate-data"]))
    try:
        cert.verify_directly_issued_by(x509.load_pem_x509_certificate(_b64(ca, "tls.crt")))
    except (InvalidSignature, ValueError, TypeError) as exc:
        return f"client certificate does not verify against <cluster>-ca: {type(exc).__name__}"
    return ""


async def _live(world: System, rkcp: dict[str, Any]) -> list[Finding]:
    """What is wrong with one live RKCP: not Ready, no TCP, another owner's, other spec, secrets."""
    meta = rkcp["metadata"]
    where = f"RKCP {meta['namespace']}/{meta['name']}"
    site, target = rkcp["spec"]["site"], rkcp["spec"].get("targetNamespace") or world.namespace
    found: list[Finding] = []
    if conditions(rkcp).get("Ready") != "True":
        ready = [c for c in rkcp.get("status", {}).get("conditions", ()) if c["status"] != "True"]
        found.append(Finding("stuck", f"{where} not Ready: {[(c['type'], c.get('reason')) for c in ready]}"))
    tcp = await world.site_kube(site).get_or_none(TCP, meta["name"], namespace=target)
    if tcp is None:
        return [*found, Finding("lost", f"{where} has no TCP at {site}")]
    if tcp["metadata"].get("annotations", {}).get(OWNER_UID) != owner_identity(rkcp):
        found.append(Finding("mismatch", f"{where}: the TCP at {site} belongs to another owner"))
    if differs := _spec_differs(await _wanted_spec(world, rkcp), tcp):
        found.append(Finding("mismatch", f"{where}: the TCP at {site} {differs}"))
    if problem := await _secrets(world, rkcp, site, target):
        kind: Kind = "lost" if problem == MISSING_SECRETS else "mismatch"
        found.append(Finding(kind, f"{where}: {problem}"))
    return found


async def _tcps(world: System, owners: set[str]) -> list[Finding]:
    """Every TCP at every site has one live owner, and no owner has two."""
    found: list[Finding] = []
    seen: dict[str, str] = {}
    for site in world.sites:
        for tcp in (await world.site_kube(site).list(TCP)).items:
            meta = tcp["metadata"]
            where = f"TCP {meta['namespace']}/{meta['name']} at {site}"
            owner = (meta.get("annotations") or {}).get(OWNER_UID)
            if owner not in owners:
                found.append(Finding("orphaned", f"{where} has no live owner ({owner})"))
            elif owner in seen:
                found.append(Finding("duplicated", f"{where} has the owner of {seen[owner]} ({owner})"))
            else:
                seen[owner] = where
    return found


def unexplained(lines: Iterable[str], allowed: Sequence[str | re.Pattern[str]]) -> list[str]:
    """The error lines that no pattern in ``allowed`` (the causes a scenario injected) explains."""
    patterns = [re.compile(a) if isinstance(a, str) else a for a in allowed]
    return [line for line in lines if not any(p.search(line) for p in patterns)]


class Expected(TypedDict, total=False):
    """What a scenario did, which ``findings`` takes into account."""

    deleted: Iterable[Deleted]
    """RKCPs the scenario deleted: they must be gone, with their TCPs."""
    since: Mapping[str, int] | None
    """``world.log_marks()`` from before the fault: the logs are checked from there."""
    allowed_errors: Sequence[str | re.Pattern[str]]
    """The causes the scenario injected: error lines matching one are expected."""


async def _rkcps(world: System) -> tuple[list[Finding], set[str]]:
    """What is wrong with each RKCP in ``mgmt``, and the uids of the live ones."""
    found: list[Finding] = []
    owners: set[str] = set()
    for rkcp in (await world.mgmt.list(RKCP)).items:
        meta = rkcp["metadata"]
        if meta.get("deletionTimestamp"):
            deleting = conditions(rkcp).get("Deleting")
            where = f"RKCP {meta['namespace']}/{meta['name']}"
            found.append(Finding("stuck", f"{where} is still being deleted ({deleting})"))
            continue
        owners.add(owner_identity(rkcp))
        found.extend(await _live(world, rkcp))
    return found, owners


async def _gone(world: System, deleted: Iterable[Deleted]) -> list[Finding]:
    """Each RKCP the scenario deleted is gone, and so is its TCP."""
    found: list[Finding] = []
    for namespace, name, site in deleted:
        if await world.mgmt.get_or_none(RKCP, name, namespace=namespace) is not None:
            found.append(Finding("stuck", f"deleted RKCP {namespace}/{name} still exists"))
        if await world.site_kube(site).get_or_none(TCP, name, namespace=world.namespace) is not None:
            found.append(Finding("orphaned", f"deleted RKCP {namespace}/{name}: its TCP is still at {site}"))
    return found


async def findings(world: System, **expected: Unpack[Expected]) -> list[Finding]:
    """Everything that does not hold now, given what the scenario did (``Expected``)."""
    found, owners = await _rkcps(world)
    found += await _gone(world, expected.get("deleted", ()))
    found += await _tcps(world, owners)
    found += [Finding("crashed", line) for line in world.failures()]
    since = expected.get("since")
    if since is not None:
        lines = unexplained(world.errors_since(since), expected.get("allowed_errors", ()))
        found += [Finding("errors", line) for line in lines]
    return found


async def violations(world: System, **expected: Unpack[Expected]) -> list[str]:
    """``findings`` as lines (``<kind>: <what>``), for assertions that name what is wrong."""
    return [str(f) for f in await findings(world, **expected)]


async def converged(world: System, **expected: Unpack[Expected]) -> bool:
    return not await findings(world, **expected)
