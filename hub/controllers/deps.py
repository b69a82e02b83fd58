"""What the controllers (RKCP and Site) are given: settings (values) and dependencies (live objects).

``Settings`` is the part of ``hub.settings.HubSettings`` the controller reads (``Settings.of``),
plus the intervals tests shorten; ``Deps`` the connections, keys and state shared with the ingest
(``hub.ingest.record``, ``hub.ingest.observations``) and the site poller. Both frozen: the controller's parts
read them and never copy them about.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import nacl.signing

from common import bus
from common import kube as ckube
from hub import metrics as hub_metrics
from hub.api import cluster
from hub.credentials import rules
from hub.ingest import liveness, record
from hub.ingest import observations as hub_observations
from hub.reconcile.rkcp import decide
from hub.settings import HubSettings
from protocol import streams, subjects

INTENT_SURVEY_SECONDS = 30.0
"""How often the hub surveys KB_INTENTS for writes behind its back (``intent_check_interval``)."""


@dataclass(frozen=True)
class Settings:
    namespaces: tuple[str, ...] = ()
    """Namespaces watched for RKCPs, Clusters and CAPI Secrets; empty: all of them."""
    watch_filter: str = ""
    """Only RKCPs and Clusters labelled ``cluster.x-k8s.io/watch-filter=<this>`` are watched; empty:
    all. The Sites and the CAPI Secrets are the hub's own and never filtered."""
    static_sites: frozenset[str] = frozenset()
    """Sites whose streams and consumers exist even before a Site object names them."""
    prefix: str = subjects.DEFAULT_PREFIX
    replicas: int = 1
    """JetStream replicas of the streams the hub creates."""
    limits: streams.SiteLimits = field(default_factory=streams.SiteLimits)
    """Each site's quota on its own stream (``protocol.streams.SiteLimits``)."""
    workers: int = 8
    """Reconciles running at once (each on a different RKCP)."""
    heartbeat_interval: float = liveness.HEARTBEAT_INTERVAL
    """The agents' heartbeat interval: a site is connected while its last beat is ≤ 3 of them old."""
    bootstrap_namespace: str = ""
    """Operator mode: where a new Site's ``<site>-nats-bootstrap`` Secret is written (empty: none)."""
    bootstrap_lifetime: float = 3600.0
    """Seconds a bootstrap credential in such a Secret is valid (it is minted again before)."""
    intent_check_interval: float = INTENT_SURVEY_SECONDS
    """Seconds between surveys of the intent stream against the hub's record (a purge or an
    overwrite behind the hub's back): one request each when nothing changed."""
    shared: bool = False
    """The sites are shared among replicas (--shard): ``Deps.holds`` says which are this one's."""
    resync_interval: float = decide.RESYNC_SECONDS
    """Every RKCP is reconciled at least this often, whatever happens (``decide.RESYNC_SECONDS``)."""

    @property
    def label_selector(self) -> str | None:
        """The selector of the RKCP and Cluster watches (``--watch-filter``)."""
        return f"{cluster.WATCH_FILTER_LABEL}={self.watch_filter}" if self.watch_filter else None

    @classmethod
    def of(cls, s: HubSettings) -> Settings:
        return cls(
            namespaces=s.watch_namespaces,
            watch_filter=s.watch_filter,
            static_sites=frozenset(s.static_sites),
            prefix=s.prefix,
            replicas=s.stream_replicas,
            limits=s.site_limits,
            workers=s.workers,
            heartbeat_interval=s.heartbeat_interval,
            bootstrap_namespace=(s.bootstrap_namespace or s.lease_namespace) if s.nats_operator_dir else "",
            bootstrap_lifetime=s.bootstrap_lifetime,
            shared=s.shard,
        )


Revoke = Callable[[Mapping[str, int]], Awaitable[None]]
"""Revoke NATS user keys (public key → unix time: its JWTs issued at or before it)."""


@dataclass(frozen=True)
class Deps:
    kube: ckube.Kube
    conn: bus.Connection
    signer: nacl.signing.SigningKey
    observations: hub_observations.Observations
    """What the sites said, per coordinates (fed by the ingest)."""
    intake: record.Intake
    """Reads the streams' last messages into ``observations`` and opens the latest box."""
    sites: liveness.Sites
    """Each site's heartbeat and backlog (fed by ``hub.ingest.heartbeats``)."""
    metrics: hub_metrics.Metrics
    earlier_keys: Mapping[str, nacl.signing.VerifyKey] = field(default_factory=dict)
    """The hub's earlier signing keys it still trusts, by key id (``--hub-public-keys``, retired
    ones left out): an intent one of them signed is the hub's
    (``hub.reconcile.rkcp.published.Published.signed``)."""
    revoke: Revoke | None = None
    """Operator mode: revokes NATS user keys (``hub.credentials.revocation``); a deleted Site's agent is
    revoked before its finalizer goes. None with static NKey users (``auth.conf``)."""
    mint_bootstrap: Callable[[str, dt.datetime], str] | None = None
    """Operator mode: a fresh bootstrap ``.creds`` for a site (``hub.credentials.operator``)."""
    issuer: rules.Issuer | None = None
    """Operator mode: who mints (a deleted Site's bootstrap credential is revoked if it did)."""
    singletons: bool = True
    """This replica runs what only one may (with --shard, the holder of ``shares.SINGLETONS``):
    the Sites' finalizers, bootstrap credentials and revocations in operator mode (a revocation
    rewrites the NATS account JWT, which must have one writer)."""
    holds: Callable[[str], bool] = lambda site: True
    """Whether this replica leads ``site`` (``hub.reconcile.shares.Share.holds`` with --shard):
    its consumers, heartbeats, Site status and control planes are this replica's; every site
    without --shard."""
