"""How far the sandbox's control planes are, from what the management cluster shows, and how to print it.

Pure: turns listed RemoteKamajiControlPlanes and the names of the CAPI Secrets beside them into a
``Snapshot`` (a phase per control plane; requested / provisioning / ready per site), and renders
it as a table (redrawn in place on a terminal) or as one line per change (logs, pipes, CI).
``sandbox.launcher.controlplanes`` does the listing; ``sandbox.run`` does the printing.

A control plane is done when its RKCP says ``status.ready`` *and* its ``<cluster>-kubeconfig``
Secret exists: that is when a CAPI user could reach the tenant cluster.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from protocol import names

__all__ = [
    "ControlPlane",
    "SiteProgress",
    "Snapshot",
    "changes",
    "new_control_plane",
    "new_snapshot",
    "table",
]

READY = "Ready"
REQUESTED = "Requested"


@dataclass(frozen=True)
class ControlPlane:
    namespace: str
    name: str
    cluster: str
    site: str
    phase: str
    """``Requested`` (the hub has published nothing yet), ``Delivering`` (published, the site has
    not answered), the site's phase (``Pending``, ``Provisioning``, ``Rejected``, …),
    ``WaitingForKubeconfig`` (Ready, the Secret not written yet), ``Ready`` or ``Deleting``."""
    ready: bool
    kubeconfig: bool
    version: str = ""
    endpoint: str = ""

    @property
    def done(self) -> bool:
        return self.ready and self.kubeconfig

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
        return f"{where}: not Ready (phase {self.phase})"


@dataclass(frozen=True)
class SiteProgress:
    site: str
    requested: int
    provisioning: int
    """At the site, not done yet."""
    ready: int


@dataclass(frozen=True)
class Snapshot:
    control_planes: tuple[ControlPlane, ...]

    @property
    def sites(self) -> tuple[SiteProgress, ...]:
        by_site: dict[str, list[ControlPlane]] = {}
        for cp in self.control_planes:
            by_site.setdefault(cp.site, []).append(cp)
        return tuple(
            SiteProgress(
                site=site,
                requested=len(cps),
                provisioning=sum(1 for cp in cps if cp.at_site and not cp.done),
                ready=sum(1 for cp in cps if cp.done),
            )
            for site, cps in sorted(by_site.items())
        )

    @property
    def ready(self) -> int:
        return sum(1 for cp in self.control_planes if cp.done)

    @property
    def done(self) -> bool:
        return all(cp.done for cp in self.control_planes)

    def missing(self) -> list[str]:
        return [cp.missing() for cp in self.control_planes if not cp.done]


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
    tcp = conditions.get("TenantControlPlaneReady") or {}
    if tcp.get("status") in ("True", "False") and tcp.get("reason"):
        # The site's own phase (Provisioning, NotReady, …) or why it refused (Rejected, Conflict).
        return str(tcp["reason"])
    ready_cond = conditions.get("Ready") or {}
    if ready_cond.get("reason") == "Conflict":
        return "Conflict"
    if (conditions.get("IntentDelivered") or {}).get("status") == "False":
        return "Delivering"
    return REQUESTED


def new_control_plane(obj: Mapping[str, Any], *, secrets: Collection[tuple[str, str]]) -> ControlPlane:
    """One RKCP's progress; ``secrets`` holds (namespace, name) of the Secrets in the management cluster."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    namespace = str(metadata.get("namespace") or "")
    cluster = _cluster_name(obj)
    ready = status.get("ready") is True
    kubeconfig = (namespace, names.capi_kubeconfig(cluster)) in secrets
    endpoint = spec.get("controlPlaneEndpoint") or {}
    return ControlPlane(
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


def new_snapshot(rkcps: Iterable[Mapping[str, Any]], *, secrets: Collection[tuple[str, str]]) -> Snapshot:
    cps = (new_control_plane(obj, secrets=secrets) for obj in rkcps)
    return Snapshot(control_planes=tuple(sorted(cps, key=lambda cp: (cp.site, cp.namespace, cp.name))))


def table(snapshot: Snapshot, *, elapsed: float, limit: int = 20) -> list[str]:
    """The live view: a line per site, then a line per control plane (at most ``limit``, not-done first)."""
    total = len(snapshot.control_planes)
    cps = snapshot.control_planes
    # Columns as wide as their content, so that the usual view fits an 80-column terminal.
    name_w = max([len("CONTROL PLANE"), *(len(cp.namespace) + 1 + len(cp.name) for cp in cps)])
    site_w = max([len("SITE"), *(len(cp.site) for cp in cps), *(len(s.site) for s in snapshot.sites)])
    phase_w = max([len("PHASE"), *(len(cp.phase) for cp in cps)])
    version_w = max([len("VERSION"), *(len(cp.version) for cp in cps)])
    lines = [f"kamaji-broker sandbox  {elapsed:6.1f}s  {snapshot.ready}/{total} control planes ready", ""]
    lines.append(f"  {'SITE':<{site_w}}  {'REQUESTED':>9}  {'PROVISIONING':>12}  {'READY':>5}")
    for s in snapshot.sites:
        lines.append(f"  {s.site:<{site_w}}  {s.requested:>9}  {s.provisioning:>12}  {s.ready:>5}")
    lines.append("")
    lines.append(
        f"  {'CONTROL PLANE':<{name_w}}  {'SITE':<{site_w}}  {'PHASE':<{phase_w}}  "
        f"{'VERSION':<{version_w}}  ENDPOINT"
    )
    # Those still on their way are the interesting ones: show them first when rows are cut.
    rows = sorted(cps, key=lambda cp: cp.done)
    for cp in rows[:limit]:
        name = f"{cp.namespace}/{cp.name}"
        lines.append(
            f"  {name:<{name_w}}  {cp.site:<{site_w}}  {cp.phase:<{phase_w}}  "
            f"{cp.version:<{version_w}}  {cp.endpoint}".rstrip()
        )
    if len(rows) > limit:
        lines.append(f"  ... and {len(rows) - limit} more")
    return lines


def changes(before: Snapshot | None, after: Snapshot, *, elapsed: float) -> list[str]:
    """Plain output: one line per control plane whose phase changed, one per site whose counts did."""
    old = {(cp.namespace, cp.name): cp for cp in (before.control_planes if before else ())}
    lines = []
    for cp in after.control_planes:
        previous = old.get((cp.namespace, cp.name))
        if previous is None or previous.phase != cp.phase:
            was = f"{previous.phase} -> " if previous is not None else ""
            lines.append(f"[{elapsed:6.1f}s] {cp.namespace}/{cp.name} ({cp.site}): {was}{cp.phase}")
    old_sites = {s.site: s for s in (before.sites if before else ())}
    for s in after.sites:
        if old_sites.get(s.site) != s:
            lines.append(
                f"[{elapsed:6.1f}s] {s.site}: requested {s.requested}, provisioning {s.provisioning}, "
                f"ready {s.ready}"
            )
    return lines
