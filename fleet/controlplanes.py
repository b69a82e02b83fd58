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

A watcher keeps each RKCP as ``observe`` reads it (``Observed``: a few strings, not the object)
and makes its control plane with ``from_observed`` when it changes; ``aged`` turns the
timestamps of one made without ``now`` into ages at each look.
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


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class Observed:
    """What a ``ControlPlane`` is made of, read off its RKCP once: what a watcher
    (``fleet.watching``) keeps per object instead of the object, and compares to tell a change
    that shows from one that does not (a new resourceVersion, a replica count)."""

    namespace: str
    name: str
    cluster: str
    site: str
    ready: bool
    deleting: bool
    secrets_synced: bool
    phase: str
    """Its phase while not ``status.ready``: the site's, ``Conflict``, ``Delivering`` or ``Requested``."""
    version: str
    endpoint: str
    cause: str
    why: str
    """``reason`` with its timestamps as written (``fleet.wording.ages`` turns them into ages)."""


def observe(obj: Mapping[str, Any]) -> Observed:
    """What of the RKCP ``obj`` its ``ControlPlane`` shows."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    conditions = _conditions(obj)
    site = str(spec.get("site") or "")
    endpoint = spec.get("controlPlaneEndpoint") or {}
    cause = _cause(obj)
    return Observed(
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        cluster=_cluster_name(obj),
        site=site,
        ready=status.get("ready") is True,
        deleting=bool(metadata.get("deletionTimestamp")),
        secrets_synced=(conditions.get(rkcp.SECRETS_SYNCED) or {}).get("status") == "True",
        phase=_phase(obj, ready=False, kubeconfig=False),
        version=str(status.get("version") or spec.get("version") or ""),
        endpoint=f"{endpoint['host']}:{endpoint.get('port', '')}" if endpoint.get("host") else "",
        cause=cause,
        why=wording.why_not_ready(conditions, site=site) if cause else "",
    )


def from_observed(
    o: Observed, *, secrets: Collection[tuple[str, str]] | None = None, now: dt.datetime | None = None
) -> ControlPlane:
    """The control plane ``o`` was observed of: ``secrets`` and ``now`` as ``new_control_plane``'s."""
    if secrets is None:
        kubeconfig = o.secrets_synced
    else:
        kubeconfig = (o.namespace, names.capi_kubeconfig(o.cluster)) in secrets
    if o.deleting:
        phase = "Deleting"
    elif o.ready:
        phase = READY if kubeconfig else "WaitingForKubeconfig"
    else:
        phase = o.phase
    return ControlPlane(
        namespace=o.namespace,
        name=o.name,
        cluster=o.cluster,
        site=o.site,
        phase=SERVING if phase == READY and o.cause else phase,
        ready=o.ready,
        kubeconfig=kubeconfig,
        version=o.version,
        endpoint=o.endpoint,
        reason=wording.ages(o.why, now),
        cause=o.cause,
    )


def new_control_plane(
    obj: Mapping[str, Any],
    *,
    secrets: Collection[tuple[str, str]] | None = None,
    now: dt.datetime | None = None,
) -> ControlPlane:
    """One RKCP; ``secrets`` holds (namespace, name) of the Secrets in the management cluster, or
    None to trust its ``SecretsSynced`` condition; ``now`` turns the timestamps of why it is not
    Ready into ages."""
    return from_observed(observe(obj), secrets=secrets, now=now)


def aged(cp: ControlPlane, now: dt.datetime) -> ControlPlane:
    """``cp`` made without ``now`` (its timestamps as written), with ages as of ``now``."""
    return dataclasses.replace(cp, reason=wording.ages(cp.reason, now)) if cp.reason else cp


def waiting_cluster(obj: Mapping[str, Any], *, now: dt.datetime | None) -> ControlPlane | None:
    """The Cluster ``obj`` as a control plane on its way, when it has a ``spec.topology`` and
    refers to no control plane yet; else None."""
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
    found = (waiting_cluster(obj, now=now) for obj in clusters)
    return [cp for cp in found if cp is not None and (cp.namespace, cp.cluster) not in theirs]
