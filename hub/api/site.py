"""The management-cluster API of a site: ``kamaji-broker.io/v1alpha1`` ``Site`` (cluster-scoped).

Owns the pydantic models of ``Site``: its spec (which management namespaces may place control
planes at the site, and into which of the site's namespaces) and its status (the hub's
inventory of the site: connectedness, last heartbeat, backlog, control planes, agent version,
the hub key ids the agent trusts). Like ``hub.api.rkcp`` for the RKCP (both build on
``hub.api.machinery``), they are the single source of the CRD (``hub.api.crds`` writes
``deploy/crds/kamaji-broker.io_sites.yaml``). ``manifest`` builds the object ``kamaji-broker
site add`` writes next to the site's credentials.

A placement is authorized by ``hub.controllers.site.placements``; this module only describes. Pure: talks to
nothing.

    apiVersion: kamaji-broker.io/v1alpha1
    kind: Site
    metadata:
      name: site-a
    spec:
      placements:            # explicit grants, on top of the same-namespace rule
        - namespaces: [team-a, team-b]
          targetNamespaces: [tenants]
      sameNamespace: true    # default: an RKCP may target the site namespace named like its own
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Annotated, Any, Final

import pydantic

from hub.api import machinery

NAMES: Final = machinery.Names(
    group="kamaji-broker.io",
    version="v1alpha1",
    kind="Site",
    categories=("kamaji-broker",),
)
API_VERSION: Final = NAMES.api_version
KIND: Final = NAMES.kind

# Condition types a Site shows.
CONNECTED: Final = "Connected"
"""The site's agent sent a heartbeat within three intervals."""
SIGNING_KEY_TRUSTED: Final = "SigningKeyTrusted"
"""The agent trusts the key the hub signs intents with (else it refuses every intent)."""

_SET: Final[dict[str, Any]] = {"x-kubernetes-list-type": "set"}

NamespaceList = Annotated[list[machinery.DNS1123Label], pydantic.Field(min_length=1, json_schema_extra=_SET)]


class Placement(machinery.Model):
    """A grant: RKCPs in these management namespaces may target these namespaces at the site."""

    namespaces: NamespaceList
    """Management-cluster namespaces whose RemoteKamajiControlPlanes the grant covers."""
    target_namespaces: NamespaceList
    """Namespaces at the site (``spec.targetNamespace``) those RKCPs may place control planes in."""


class SiteSpec(machinery.Model):
    """Who may place control planes at this site, and where."""

    placements: list[Placement] = pydantic.Field(default_factory=list)
    """Explicit grants; an RKCP is authorized when one names both its namespace and its
    target namespace."""
    same_namespace: bool = True
    """Whether an RKCP may also target the site namespace named exactly like its own namespace
    (the default rule, for one namespace per tenant on both sides)."""


class SiteCredential(machinery.Model):
    """The NATS credential the hub last minted for the site's agent (operator mode)."""

    public_key: str
    """The agent's user NKey (public): what deleting the Site revokes."""
    issued_at: dt.datetime | None = None
    expires_at: dt.datetime | None = None
    """When the JWT expires unless the agent renews it before."""


class SiteStatus(machinery.Model):
    """The site as the hub sees it (written by the hub only, on change)."""

    connected: bool | None = None
    """The agent's heartbeat is fresh (unset before the first heartbeat)."""
    last_heartbeat_time: dt.datetime | None = None
    """When the agent's latest heartbeat reached the bus."""
    backlog: Annotated[int, pydantic.Field(ge=0)] | None = None
    """Intents the site's consumer has not processed yet (pending plus unacknowledged)."""
    control_planes: Annotated[int, pydantic.Field(ge=0)] = 0
    """RemoteKamajiControlPlanes placed at this site."""
    agent_version: str | None = None
    """The version the agent reports in its heartbeat."""
    trusted_key_ids: list[str] = pydantic.Field(default_factory=list)
    """Ids of the hub signing keys the agent trusts (from its heartbeat; empty for an agent too
    old to say)."""
    observed_generation: Annotated[int, pydantic.Field(ge=0)] | None = None
    """The ``metadata.generation`` this status was computed for."""
    conditions: machinery.Conditions = pydantic.Field(default_factory=list)
    """Connected, SigningKeyTrusted."""
    credential: SiteCredential | None = None
    """Operator mode: the agent's NATS credential (written by the credential service only)."""


class Site(machinery.Object):
    """A site (control-plane cluster running an agent) and who may place control planes there."""

    api_version: str = API_VERSION
    kind: str = KIND
    spec: SiteSpec = pydantic.Field(default_factory=SiteSpec)
    status: SiteStatus = pydantic.Field(default_factory=SiteStatus)


BOOTSTRAP_ANNOTATION: Final = "kamaji-broker.io/bootstrap-credential"
"""The JWT (public: no seed) of the bootstrap credential ``site add`` wrote with the Site's
manifest, before the Site exists. The hub mints on a bootstrap credential older than the Site
only for this one, and revokes it when the Site is deleted."""


def manifest(name: str, *, placements: Sequence[Placement] = (), bootstrap_jwt: str = "") -> dict[str, Any]:
    """The Site object for ``name`` as ``kubectl apply`` takes it (no status); with the
    bootstrap credential made for it, if given."""
    spec = SiteSpec(placements=list(placements))
    metadata: dict[str, Any] = {"name": name}
    if bootstrap_jwt:
        metadata["annotations"] = {BOOTSTRAP_ANNOTATION: bootstrap_jwt}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": spec.to_dict(),
    }
