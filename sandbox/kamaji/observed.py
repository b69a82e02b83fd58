"""What the Kamaji simulator decides from, for one TenantControlPlane: ``Observed`` (the TCP and
its Secrets as seen), ``Memory`` (what it remembers between visits), ``Timings``. Pure data,
used by :mod:`sandbox.kamaji.reconcile` and :mod:`sandbox.kamaji.reconcile_status`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DEFAULT_PORT", "DEFAULT_REPLICAS", "Memory", "Observed", "SecretsObserved", "Timings"]

DEFAULT_PORT = 6443
"""Kamaji's default for ``spec.networkProfile.port``."""
DEFAULT_REPLICAS = 2
"""Kamaji's default for ``spec.controlPlane.deployment.replicas``."""


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
