"""What the Kamaji simulator decides for one TenantControlPlane: observed state + now → plan.

Pure: no await, no clients, no clock reads (``now`` is a monotonic time passed in). The shell in
``sandbox.kamaji.simulator`` observes the TCP and its two Secrets, calls :func:`reconcile`, runs
the plan's actions in order, writes the status, keeps :class:`Memory` for the next visit and
comes back after ``requeue_after`` seconds.

Lifecycle, following Kamaji's ``status.kubernetesResources.version.status``:

- replicas 0 → ``Sleeping`` (at once);
- never installed → ``Provisioning`` → ``Ready`` after ``ready_delay``;
- installed version ≠ spec version → ``Upgrading`` → ``Ready`` after ``ready_delay``;
- woken from ``Sleeping`` → ``NotReady`` → ``Ready`` after ``ready_delay``;
- deleting → the finalizer is removed ``delete_delay`` after the deletion was first seen.

Delays are measured from when the simulator first saw the transition (its :class:`Memory`), not
from API timestamps: those have one-second resolution and come from another clock.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from common import objects

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_REPLICAS",
    "FINALIZER",
    "Action",
    "AddFinalizer",
    "Memory",
    "Observed",
    "Phase",
    "Plan",
    "RemoveFinalizer",
    "SecretsObserved",
    "Timings",
    "WriteAdminKubeconfig",
    "WriteCA",
    "admin_kubeconfig_secret_name",
    "ca_secret_name",
    "endpoint",
    "is_subset",
    "new_observed",
    "new_status",
    "reconcile",
    "reconcile_delete",
    "reconcile_normal",
]

FINALIZER = "finalizer.kamaji.clastix.io"
DEFAULT_PORT = 6443
"""Kamaji's default for ``spec.networkProfile.port``."""
DEFAULT_REPLICAS = 2
"""Kamaji's default for ``spec.controlPlane.deployment.replicas``."""
DEFAULT_DATA_STORE = "default"
"""``status.storage.dataStoreName`` when ``spec.dataStore`` is unset (Kamaji's default DataStore)."""


class Phase(enum.StrEnum):
    """Values of ``status.kubernetesResources.version.status`` (Kamaji's enum; the simulator uses five)."""

    UNKNOWN = "Unknown"
    PROVISIONING = "Provisioning"
    CA_ROTATING = "CertificateAuthorityRotating"
    UPGRADING = "Upgrading"
    MIGRATING = "Migrating"
    READY = "Ready"
    NOT_READY = "NotReady"
    SLEEPING = "Sleeping"
    WRITE_LIMITED = "WriteLimited"


# Phases that last ready_delay and then become Ready.
_TRANSITIONAL = frozenset({Phase.PROVISIONING, Phase.UPGRADING, Phase.NOT_READY})


@dataclass(frozen=True)
class Timings:
    ready_delay: float = 3.0
    """Seconds from Provisioning/Upgrading/NotReady to Ready (a real control plane takes 30-90 s)."""
    delete_delay: float = 0.0
    """Seconds between seeing a deletion and removing the finalizer (Kamaji's cleanup)."""


@dataclass(frozen=True)
class SecretsObserved:
    """The generated Secrets as observed; only Secrets owned by this TCP (same uid) count."""

    ca: bool = False
    """``<name>-ca`` exists with an ownerReference to this TCP."""
    admin_kubeconfig_server: str | None = None
    """The server of ``admin.conf`` in ``<name>-admin-kubeconfig`` when owned by this TCP, else None."""


@dataclass(frozen=True)
class Observed:
    """One TenantControlPlane as the simulator needs it (see :func:`new_observed`)."""

    namespace: str
    name: str
    uid: str
    generation: int = 1
    deleting: bool = False
    finalizers: tuple[str, ...] = ()
    version: str = ""
    replicas: int = DEFAULT_REPLICAS
    address: str = ""
    """``spec.networkProfile.address``; empty → :attr:`allocated_address`."""
    port: int = DEFAULT_PORT
    data_store: str = ""
    status: Mapping[str, Any] = field(default_factory=dict)
    secrets: SecretsObserved = SecretsObserved()
    allocated_address: str = ""
    """An address from the simulator's pool, used when the spec names none."""


@dataclass(frozen=True)
class Memory:
    """What the simulator remembers about one TCP between visits (it is not in the API)."""

    uid: str = ""
    phase: str = ""
    """The transitional phase being timed ('' when none)."""
    target: str = ""
    """The spec version that phase rolls out (a new version restarts the timer)."""
    since: float | None = None
    """Monotonic time when that phase began."""
    deleting_since: float | None = None
    """Monotonic time when the deletion was first seen."""


@dataclass(frozen=True)
class AddFinalizer:
    """Add :data:`FINALIZER` (first, before any other write, so no deletion can outrun our cleanup)."""


@dataclass(frozen=True)
class RemoveFinalizer:
    """Remove :data:`FINALIZER`; the API server then deletes the TCP, and its Secrets by ownership."""


@dataclass(frozen=True)
class WriteCA:
    """Generate a new CA and create or replace ``<name>-ca`` with it."""


@dataclass(frozen=True)
class WriteAdminKubeconfig:
    """Create or replace ``<name>-admin-kubeconfig`` with kubeconfigs signed by the current CA."""

    server: str
    """``https://<endpoint>``, for ``admin.conf`` and ``super-admin.conf``."""
    svc_server: str
    """``https://<name>.<namespace>.svc:<port>``, for the ``.svc`` variants."""


Action = AddFinalizer | RemoveFinalizer | WriteCA | WriteAdminKubeconfig


@dataclass(frozen=True)
class Plan:
    actions: tuple[Action, ...] = ()
    """To run in order, before the status write."""
    status: dict[str, Any] | None = None
    """A JSON merge patch for the status subresource; None when the status is already right."""
    memory: Memory = Memory()
    requeue_after: float | None = None
    """Seconds until the next visit is due even without an event; None: only on events."""


def ca_secret_name(name: str) -> str:
    return f"{name}-ca"


def admin_kubeconfig_secret_name(name: str) -> str:
    return f"{name}-admin-kubeconfig"


def new_observed(
    tcp: Mapping[str, Any],
    *,
    secrets: SecretsObserved = SecretsObserved(),
    allocated_address: str = "",
) -> Observed:
    """Read a TenantControlPlane object (as the API returns it) into :class:`Observed`.

    Kamaji's defaults apply to absent fields, because a cluster without defaulting (or a
    schema without defaults) may hand the object over without them.
    """
    metadata = tcp.get("metadata") or {}
    replicas = objects.dig(tcp, "spec", "controlPlane", "deployment", "replicas")
    port = objects.dig(tcp, "spec", "networkProfile", "port")
    status = tcp.get("status")
    return Observed(
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        generation=int(metadata.get("generation") or 1),
        deleting=bool(metadata.get("deletionTimestamp")),
        finalizers=tuple(metadata.get("finalizers") or ()),
        version=str(objects.dig(tcp, "spec", "kubernetes", "version") or ""),
        replicas=DEFAULT_REPLICAS if replicas is None else int(replicas),
        address=str(objects.dig(tcp, "spec", "networkProfile", "address") or ""),
        port=DEFAULT_PORT if not port else int(port),
        data_store=str(objects.dig(tcp, "spec", "dataStore") or ""),
        status=status if isinstance(status, Mapping) else {},
        secrets=secrets,
        allocated_address=allocated_address,
    )


def endpoint(host: str, port: int) -> str:
    """``host:port`` as Kamaji writes ``status.controlPlaneEndpoint`` (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def reconcile(observed: Observed, memory: Memory, *, now: float, timings: Timings) -> Plan:
    """The plan for one visit; ``memory`` is what the previous visit's plan returned."""
    if memory.uid != observed.uid:
        # A TCP recreated under the same name is a new object: nothing carries over.
        memory = Memory(uid=observed.uid)
    if observed.deleting:
        return reconcile_delete(observed, memory, now=now, timings=timings)
    return reconcile_normal(observed, memory, now=now, timings=timings)


def reconcile_delete(observed: Observed, memory: Memory, *, now: float, timings: Timings) -> Plan:
    if FINALIZER not in observed.finalizers:
        # Nothing of ours holds the object: whatever else holds it is not our business.
        return Plan(memory=memory)
    since = now if memory.deleting_since is None else memory.deleting_since
    memory = dataclasses.replace(memory, deleting_since=since)
    remaining = since + timings.delete_delay - now
    if remaining > 0:
        return Plan(memory=memory, requeue_after=remaining)
    return Plan(actions=(RemoveFinalizer(),), memory=memory)


def reconcile_normal(observed: Observed, memory: Memory, *, now: float, timings: Timings) -> Plan:
    actions: list[Action] = []
    if FINALIZER not in observed.finalizers:
        actions.append(AddFinalizer())
    host = observed.address or observed.allocated_address
    server = f"https://{endpoint(host, observed.port)}"
    svc_server = f"https://{observed.name}.{observed.namespace}.svc:{observed.port}"
    if not observed.secrets.ca:
        # A new CA invalidates every certificate signed by the old one: reissue the kubeconfigs too.
        actions += [WriteCA(), WriteAdminKubeconfig(server=server, svc_server=svc_server)]
    elif observed.secrets.admin_kubeconfig_server != server:
        actions.append(WriteAdminKubeconfig(server=server, svc_server=svc_server))
    phase, installed, memory, requeue_after = _next_phase(observed, memory, now=now, timings=timings)
    status = new_status(observed, phase=phase, installed=installed, host=host)
    return Plan(
        actions=tuple(actions),
        status=None if is_subset(status, observed.status) else status,
        memory=memory,
        requeue_after=requeue_after,
    )


def _target_phase(observed: Observed, installed: str) -> Phase:
    if observed.replicas == 0:
        return Phase.SLEEPING
    if not installed:
        return Phase.PROVISIONING
    if installed != observed.version:
        return Phase.UPGRADING
    if objects.dig(observed.status, "kubernetesResources", "version", "status") in (
        Phase.SLEEPING,
        Phase.NOT_READY,
    ):
        return Phase.NOT_READY
    return Phase.READY


def _next_phase(
    observed: Observed, memory: Memory, *, now: float, timings: Timings
) -> tuple[Phase, str, Memory, float | None]:
    """(phase, installed version, memory, requeue_after) for this visit."""
    installed = str(objects.dig(observed.status, "kubernetesResources", "version", "version") or "")
    target = _target_phase(observed, installed)
    if target not in _TRANSITIONAL:
        return target, installed, dataclasses.replace(memory, phase="", target="", since=None), None
    timed = memory.phase == target and memory.target == observed.version and memory.since is not None
    since = memory.since if timed and memory.since is not None else now
    remaining = since + timings.ready_delay - now
    if remaining > 0:
        memory = dataclasses.replace(memory, phase=target, target=observed.version, since=since)
        return target, installed, memory, remaining
    return Phase.READY, observed.version, dataclasses.replace(memory, phase="", target="", since=None), None


def _replica_counts(phase: Phase, replicas: int) -> dict[str, int]:
    """The Deployment's counts as Kamaji mirrors them, for a rollout with maxUnavailable 0."""
    if phase is Phase.SLEEPING:
        replicas = 0
    ready = replicas if phase in (Phase.READY, Phase.UPGRADING) else 0
    # During an upgrade the old pods stay available while none runs the new version yet.
    updated = 0 if phase is Phase.UPGRADING else replicas
    return {
        "replicas": replicas,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "updatedReplicas": updated,
        "unavailableReplicas": replicas - ready,
    }


def new_status(observed: Observed, *, phase: Phase, installed: str, host: str) -> dict[str, Any]:
    """The status fields the simulator owns (a merge patch: other fields are left alone)."""
    version: dict[str, Any] = {"status": str(phase)}
    if installed:
        version["version"] = installed
    return {
        "observedGeneration": observed.generation,
        "controlPlaneEndpoint": endpoint(host, observed.port),
        "kubeconfig": {"admin": {"secretName": admin_kubeconfig_secret_name(observed.name)}},
        "certificates": {"ca": {"secretName": ca_secret_name(observed.name)}},
        "storage": {"dataStoreName": observed.data_store or DEFAULT_DATA_STORE},
        "kubernetesResources": {
            "version": version,
            "deployment": {
                "name": observed.name,
                "namespace": observed.namespace,
                "selector": f"kamaji.clastix.io/name={observed.name}",
                **_replica_counts(phase, observed.replicas),
            },
        },
    }


def is_subset(part: Mapping[str, Any], whole: Mapping[str, Any]) -> bool:
    """True when applying ``part`` as a merge patch to ``whole`` would change nothing."""
    for key, value in part.items():
        if key not in whole:
            return False
        if isinstance(value, Mapping):
            if not isinstance(whole[key], Mapping) or not is_subset(value, whole[key]):
                return False
        elif whole[key] != value:
            return False
    return True
