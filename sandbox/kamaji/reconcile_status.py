"""The status side of the Kamaji simulator's decisions: the phase lifecycle and the status it writes.

Pure, like :mod:`sandbox.kamaji.reconcile`, which calls it for every live TCP. Lifecycle, following
Kamaji's ``status.kubernetesResources.version.status``:

- replicas 0 → ``Sleeping`` (at once);
- never installed → ``Provisioning`` → ``Ready`` after ``ready_delay``;
- installed version ≠ spec version → ``Upgrading`` → ``Ready`` after ``ready_delay``;
- woken from ``Sleeping`` → ``NotReady`` → ``Ready`` after ``ready_delay``.

Delays are measured from when the simulator first saw the transition (its ``Memory``), not
from API timestamps: those have one-second resolution and come from another clock.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from common import objects
from protocol import names

if TYPE_CHECKING:  # the types are only annotations here
    from sandbox.kamaji.observed import Memory, Observed, Timings

__all__ = ["DEFAULT_DATA_STORE", "Phase", "endpoint", "is_subset", "new_status", "next_phase"]

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


def endpoint(host: str, port: int) -> str:
    """``host:port`` as Kamaji writes ``status.controlPlaneEndpoint`` (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


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


def next_phase(
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
        "kubeconfig": {"admin": {"secretName": names.kamaji_kubeconfig(observed.name)}},
        "certificates": {"ca": {"secretName": names.kamaji_ca(observed.name)}},
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
