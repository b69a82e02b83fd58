"""What the Kamaji simulator decides for one TenantControlPlane: observed state + now → plan.

Pure: no await, no clients, no clock reads (``now`` is a monotonic time passed in). The shell in
``sandbox.kamaji.simulator`` observes the TCP and its two Secrets, calls :func:`reconcile`, runs
the plan's actions in order, writes the status, keeps :class:`Memory` for the next visit and
comes back after ``requeue_after`` seconds.

Finalizer first; the ``<tcp>-ca`` and ``<tcp>-admin-kubeconfig`` Secrets (re)written when missing or
not ours or pointing elsewhere; deleting → the finalizer is removed ``delete_delay`` after the
deletion was first seen (:class:`Memory`). The phase lifecycle and the status it writes are
:mod:`sandbox.kamaji.reconcile_status`'s; what both decide from is :mod:`sandbox.kamaji.observed`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from common import objects
from sandbox.kamaji import reconcile_status
from sandbox.kamaji.observed import DEFAULT_PORT, DEFAULT_REPLICAS, Memory, Observed, SecretsObserved, Timings

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_REPLICAS",
    "FINALIZER",
    "Action",
    "AddFinalizer",
    "Memory",
    "Observed",
    "Plan",
    "RemoveFinalizer",
    "SecretsObserved",
    "Timings",
    "WriteAdminKubeconfig",
    "WriteCA",
    "new_observed",
    "reconcile",
    "reconcile_delete",
    "reconcile_normal",
]

FINALIZER = "finalizer.kamaji.clastix.io"


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
    memory: Memory = field(default_factory=Memory)
    requeue_after: float | None = None
    """Seconds until the next visit is due even without an event; None: only on events."""


def new_observed(
    tcp: Mapping[str, Any],
    *,
    secrets: SecretsObserved | None = None,
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
        secrets=secrets or SecretsObserved(),
        allocated_address=allocated_address,
    )


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
    server = f"https://{reconcile_status.endpoint(host, observed.port)}"
    svc_server = f"https://{observed.name}.{observed.namespace}.svc:{observed.port}"
    if not observed.secrets.ca:
        # A new CA invalidates every certificate signed by the old one: reissue the kubeconfigs too.
        actions += [WriteCA(), WriteAdminKubeconfig(server=server, svc_server=svc_server)]
    elif observed.secrets.admin_kubeconfig_server != server:
        actions.append(WriteAdminKubeconfig(server=server, svc_server=svc_server))
    phase, installed, memory, requeue_after = reconcile_status.next_phase(
        observed, memory, now=now, timings=timings
    )
    status = reconcile_status.new_status(observed, phase=phase, installed=installed, host=host)
    return Plan(
        actions=tuple(actions),
        status=None if reconcile_status.is_subset(status, observed.status) else status,
        memory=memory,
        requeue_after=requeue_after,
    )
