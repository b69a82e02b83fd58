"""A RemoteKamajiControlPlane at a glance (``fleet.verdicts``): its phase, whether it is Ready, and
why not (in words: ``fleet.wording``). Pure.

A control plane is done (serving, for a CAPI user) when its RKCP says ``status.ready`` *and* its
``<cluster>-kubeconfig`` Secret exists (``secrets`` given: the sandbox lists them) or is synced
(its ``SecretsSynced`` condition: what ``kamaji-broker status`` reads, without reading any
Secret). It is Ready when, besides, its ``Ready`` condition is True: the one meaning of Ready
in the fleet's views (the PHASE they show, the count in their headers, what the sandbox waits
for); a control plane done but not Ready is ``Serving``.

A Cluster of a ClusterClass has no RKCP until CAPI's topology controller makes one: until then
``waiting_clusters`` stands in for it, ``WaitingForTopology``, with why from the Cluster's
``TopologyReconciled`` condition (its class missing, say), so that it is not simply absent.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from fleet import wording
from hub.api import rkcp
from protocol import names

READY: Final = "Ready"
SERVING: Final = "Serving"
REQUESTED: Final = "Requested"
WAITING_FOR_TOPOLOGY: Final = "WaitingForTopology"
TOPOLOGY_RECONCILED: Final = "TopologyReconciled"


@dataclass(frozen=True)
class ControlPlane:
    namespace: str
    name: str
    cluster: str
    site: str
    phase: str
    """``Requested`` (the hub has published nothing yet), ``Delivering`` (published, the site has
    not answered), the site's phase (``Pending``, ``Provisioning``, ``Rejected``, …),
    ``WaitingForKubeconfig`` (serving, the Secret not written yet), ``Serving`` (serving with
    its Secret, but its ``Ready`` condition is not True: its site disconnected, say), ``Ready``
    or ``Deleting``."""
    ready: bool
    kubeconfig: bool
    version: str = ""
    endpoint: str = ""
    reason: str = ""
    """Why it is not Ready, in words, when its ``Ready`` condition is not True (a control plane
    still serving says so when its site is disconnected, say); ages as of the look."""
    cause: str = ""
    """The ``Ready`` condition's reason and message as written: unlike ``reason``'s ages, it
    stays the same from one look to the next while nothing changes (what events compare)."""

    @property
    def done(self) -> bool:
        """Serving, with its kubeconfig Secret: a CAPI user can reach it."""
        return self.ready and self.kubeconfig

    @property
    def healthy(self) -> bool:
        """Ready: done, and its ``Ready`` condition does not say otherwise."""
        return self.done and not (self.reason or self.cause)

    @property
    def at_site(self) -> bool:
        """The site has reported on it (it exists there), whether or not it is Ready yet."""
        return self.phase not in (REQUESTED, "Delivering")

    def missing(self) -> str:
        """What stands between it and done, in words (empty when done)."""
        if self.done:
            return ""
        where = f"{self.namespace}/{self.name} at {self.site}"
        if self.ready:
            return f"{where}: Ready, but Secret {self.namespace}/{self.cluster}-kubeconfig not written yet"
        return f"{where}: not Ready (phase {self.phase})" + (f": {self.reason}" if self.reason else "")

    def problem(self) -> str:
        """What is wrong with it, in words (empty when healthy)."""
        if not self.done:
            return self.missing()
        if self.reason:
            return f"{self.namespace}/{self.name} at {self.site}: serving, but not Ready: {self.reason}"
        return ""


def _conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    status = obj.get("status") or {}
    return {str(c.get("type")): c for c in status.get("conditions") or () if isinstance(c, Mapping)}


def _cluster_name(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    for ref in metadata.get("ownerReferences") or ():
        if ref.get("kind") == "Cluster":
            return str(ref.get("name") or "")
    return str(metadata.get("name") or "")


def _phase(obj: Mapping[str, Any], *, ready: bool, kubeconfig: bool) -> str:
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return "Deleting"
    if ready:
        return READY if kubeconfig else "WaitingForKubeconfig"
    conditions = _conditions(obj)
    tcp = conditions.get(rkcp.TENANT_CONTROL_PLANE_READY) or {}
    if tcp.get("status") in ("True", "False") and tcp.get("reason"):
        # The site's own phase (Provisioning, NotReady, …) or why it refused (Rejected, Conflict).
        return str(tcp["reason"])
    ready_cond = conditions.get(rkcp.READY) or {}
    if ready_cond.get("reason") == "Conflict":
        return "Conflict"
    if (conditions.get(rkcp.INTENT_DELIVERED) or {}).get("status") == "False":
        return "Delivering"
    return REQUESTED


def _cause(obj: Mapping[str, Any]) -> str:
    ready = _conditions(obj).get(rkcp.READY) or {}
    if ready.get("status") == "True":
        return ""
    reason, message = str(ready.get("reason") or ""), str(ready.get("message") or "")
    # On one line: a summary's message lists each condition on a line of its own.
    message = " ".join(message.split())
    return f"{reason}: {message}" if reason and message else reason or message


def new_control_plane(
    obj: Mapping[str, Any],
    *,
    secrets: Collection[tuple[str, str]] | None = None,
    now: dt.datetime | None = None,
) -> ControlPlane:
    """One RKCP; ``secrets`` holds (namespace, name) of the Secrets in the management cluster, or
    None to trust its ``SecretsSynced`` condition; ``now`` turns the timestamps of why it is not
    Ready into ages."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    namespace = str(metadata.get("namespace") or "")
    cluster = _cluster_name(obj)
    ready = status.get("ready") is True
    if secrets is None:
        kubeconfig = (_conditions(obj).get(rkcp.SECRETS_SYNCED) or {}).get("status") == "True"
    else:
        kubeconfig = (namespace, names.capi_kubeconfig(cluster)) in secrets
    endpoint = spec.get("controlPlaneEndpoint") or {}
    cp = ControlPlane(
        namespace=namespace,
        name=str(metadata.get("name") or ""),
        cluster=cluster,
        site=str(spec.get("site") or ""),
        phase=_phase(obj, ready=ready, kubeconfig=kubeconfig),
        ready=ready,
        kubeconfig=kubeconfig,
        version=str(status.get("version") or spec.get("version") or ""),
        endpoint=f"{endpoint['host']}:{endpoint.get('port', '')}" if endpoint.get("host") else "",
    )
    cause = _cause(obj)
    why = wording.why_not_ready(_conditions(obj), site=cp.site, now=now) if cause else ""
    phase = SERVING if cp.phase == READY and cause else cp.phase
    return dataclasses.replace(cp, phase=phase, reason=why, cause=cause)


def _waiting_cluster(obj: Mapping[str, Any], *, now: dt.datetime | None) -> ControlPlane | None:
    spec = obj.get("spec") or {}
    topology = spec.get("topology")
    if not isinstance(topology, Mapping) or spec.get("controlPlaneRef"):
        return None
    metadata = obj.get("metadata") or {}
    values = {
        v.get("name"): v.get("value") for v in topology.get("variables") or () if isinstance(v, Mapping)
    }
    reconciled = _conditions(obj).get(TOPOLOGY_RECONCILED) or {}
    failed = reconciled.get("status") == "False"
    message = " ".join(str(reconciled.get("message") or "").split()) if failed else ""
    name = str(metadata.get("name") or "")
    return ControlPlane(
        namespace=str(metadata.get("namespace") or ""),
        name=name,
        cluster=name,
        # The site variable of the ClusterClass kamaji-broker ships: a guess for any other class.
        site=str(values.get("site") or "-"),
        phase=WAITING_FOR_TOPOLOGY,
        ready=False,
        kubeconfig=False,
        version=str(topology.get("version") or ""),
        reason=wording.ages(message, now) or "waiting for the topology controller to make its control plane",
        cause=f"{reconciled.get('reason') or ''}: {message}" if failed else "",
    )


def waiting_clusters(
    clusters: Iterable[Mapping[str, Any]], made: Iterable[ControlPlane], *, now: dt.datetime | None = None
) -> list[ControlPlane]:
    """The Clusters with a ``spec.topology`` and no control plane yet (none refers to one, and no
    RKCP of ``made`` is theirs), each as a control plane on its way."""
    theirs = {(cp.namespace, cp.cluster) for cp in made}
    found = (_waiting_cluster(obj, now=now) for obj in clusters)
    return [cp for cp in found if cp is not None and (cp.namespace, cp.cluster) not in theirs]
