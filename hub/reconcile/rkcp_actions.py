"""What an RKCP reconcile asks its shell to do: small frozen values, no I/O. Pure.

``hub.reconcile.rkcp`` plans them (in order, finalizer first) and ``hub.controllers.rkcp``
performs them: the Kubernetes writes (finalizers, the endpoint and the InfraCluster's, events,
the CAPI Secrets through ``hub.controllers.writing``) and the NATS ones (topology, intents,
purges). A plan never holds secret material: ``WriteSecrets`` names the box by checksum, the
shell opens it (the box the hub kept, or the stream's). ``Outcome`` is what became of the
last ``PatchInfraEndpoint`` (the shell records it, ``rkcp_infra`` reads it).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class AddFinalizer:
    owner_uid: str = ""
    """The owner identity stamped in the same patch (``hub.reconcile.owner``)."""


@dataclass(frozen=True)
class RemoveFinalizer:
    pass


@dataclass(frozen=True)
class EnsureTopology:
    """Create the site's stream and the hub's consumer on it (idempotent): the site appeared
    after the hub started, and its agent cannot report before they exist."""


@dataclass(frozen=True)
class Publish:
    op: Literal["provision", "delete"]
    spec: dict[str, Any]
    expected_last_seq: int
    """Fencing: the subject's sequence we based the decision on (0: no message yet)."""
    replaces: tuple[str, ...] = ()
    """Earlier owners whose TCP the site may delete to apply this intent (``replaced_owners``)."""
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)
    """``labels`` and ``annotations`` the TCP carries beside the agent's own (provision only)."""


@dataclass(frozen=True)
class Purge:
    """Remove the control plane's intent, status and secrets subjects."""


@dataclass(frozen=True)
class Release:
    """The site-unavailable timeout released this owner's deletion: its delete intent (``seq``)
    stays for the site, and its subjects are purged once the site confirms."""

    seq: int


@dataclass(frozen=True)
class WriteSecrets:
    """Fetch the latest sealed secrets from the stream, open them and write the CAPI Secrets, if
    the box is still the one decided on (``checksum``, ``owner_uid``). Plans hold no plaintext."""

    checksum: str
    owner_uid: str
    """The uid the sealed message names; ``hub.controllers.writing`` writes only for that RKCP."""


@dataclass(frozen=True)
class SetEndpoint:
    host: str
    port: int


@dataclass(frozen=True)
class PatchInfraEndpoint:
    """Set ``spec.controlPlaneEndpoint`` of the Cluster's InfraCluster (any kind that has the
    field) to ``host:port``, if it is unset or different (``hub.reconcile.rkcp_infra``)."""

    group: str
    version: str
    """"": the group's preferred version (a v1beta2 reference names no version)."""
    kind: str
    name: str
    namespace: str
    host: str
    port: int


@dataclass(frozen=True)
class Event:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


Action = (
    AddFinalizer
    | RemoveFinalizer
    | EnsureTopology
    | Publish
    | Purge
    | Release
    | WriteSecrets
    | SetEndpoint
    | PatchInfraEndpoint
    | Event
)


State = Literal["set", "refused", "waiting"]


@dataclass(frozen=True)
class Outcome:
    """What became of the last attempt for this RKCP."""

    target: PatchInfraEndpoint
    """The attempt (object and endpoint): a new target is a new attempt."""
    state: State
    reason: str
    at: dt.datetime
