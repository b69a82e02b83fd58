"""The hub's configuration: every flag of ``kamaji-broker hub`` and its environment variable.

Flags win over environment variables (``KB_HUB_<FIELD>``); an invalid or missing value fails
start-up with an error naming the flag.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Self

from pydantic import Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from common.durations import Duration
from common.settings import ExistingFile, NamespaceList, ProcessSettings, SiteList, split
from protocol import credentials, labels, streams

_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
"""A Kubernetes label value (at most 63 characters, checked apart)."""


class HubSettings(ProcessSettings):
    model_config = SettingsConfigDict(env_prefix="KB_HUB_", extra="forbid", use_attribute_docstrings=True)

    signing_key: ExistingFile
    """The Ed25519 key that signs intents (``keys generate``: signing.key)."""
    sealing_keys: Path
    """Directory of X25519 private keys (``keys generate``: sealing/). All are kept to open sealed
    secrets, each box by the key id it names, so boxes sealed before a rotation still open."""
    hub_public_keys: ExistingFile | None = None
    """The hub's public keys (``keys generate``: hub-public-keys.json): an intent signed by an
    earlier signing key listed there and not retired counts as the hub's (a clusterctl move after a
    key rotation); without it, only the current key's."""
    namespaces: NamespaceList = ""
    """Comma-separated namespaces to watch for RemoteKamajiControlPlanes; empty with --all-namespaces."""
    namespace: str | None = None
    """The one namespace to watch (Cluster API providers' --namespace), instead of --namespaces or
    --all-namespaces; given empty, every namespace (as a provider's --namespace="")."""
    watch_filter: str = ""
    """Reconcile only the RemoteKamajiControlPlanes and Clusters labelled
    ``cluster.x-k8s.io/watch-filter=<value>`` (Cluster API providers' --watch-filter); empty: all.
    Label the Cluster too: an RKCP whose Cluster the filter hides waits with ``WaitingForCluster``.
    Sites and the Cluster API Secrets are the hub's own and never filtered."""
    sites: SiteList = ""
    """Sites whose streams and consumers exist even before an object references them (the hub also
    makes them for every Site as soon as it sees it, control planes placed there or not)."""
    leader_elect: bool = False
    """Reconcile only while holding the Lease --lease-namespace/--lease-name (Cluster API
    providers' --leader-elect): of several replicas one leads, the others stand by."""
    shard: bool = False
    """Share the sites among every replica that runs with it, instead of one leading them all:
    each replica keeps a Lease of its own (``<lease-name>-<hash>`` in --lease-namespace) and leads
    the sites rendezvous hashing gives it among the live replicas; a replica that joins or
    dies moves only its share, and no site is led by two at once. The credential service and the
    NATS account (operator mode) go with one of them. Instead of --leader-elect."""
    lease_namespace: str = ""
    """Namespace of the leader-election Lease, or of the replicas' Leases (required with
    --leader-elect and --shard)."""
    lease_name: str = "kamaji-broker-hub"
    """Name of the leader-election Lease; with --shard, the label value and name prefix of the
    replicas' Leases."""
    lease_duration: Duration = 15.0
    """How long the Lease holds without a renewal. The leader renews every third of it; one that
    cannot renew within it stops leading before another replica may take over."""
    identity: str = ""
    """This replica's name in the Lease (default: hostname and pid)."""
    stream_replicas: int = Field(default=1, ge=1, le=5)
    """JetStream replicas of the streams (KB_INTENTS and one per site; 1 in a single server, 3 in a
    cluster)."""
    max_msg_size: int = Field(default=streams.MAX_MSG_SIZE, ge=1024, le=streams.MAX_PAYLOAD)
    """Bytes: the largest message a site's stream stores (64 KiB: three times a sealed box of an
    admin kubeconfig and a CA with RSA-4096 keys); at most nats-config's max_payload (128 KiB)."""
    site_max_msgs: int = Field(default=streams.SITE_MAX_MSGS, ge=2)
    """Messages a site's stream holds (a status and a sealed box per control plane, plus the
    heartbeat: 4096 is about 2,000 control planes per site); beyond it a site's publish of a new
    subject is refused, while updates of subjects it already has still fit."""
    site_max_bytes: int = Field(default=streams.SITE_MAX_BYTES, ge=1024)
    """Bytes a site's stream holds (64 MiB): the most one site can cost the store, whatever it
    sends; about twice what 2,000 control planes need. nats-server reserves it per site when the
    stream is made: its ``max_file_store`` must hold sites x this."""
    workers: int = Field(default=8, ge=1, le=64)
    """Reconciles running at once, each on a different RemoteKamajiControlPlane."""
    heartbeat_interval: Duration = 10.0
    """The agents' heartbeat interval: a site counts as connected for three of them after a beat."""
    nats_operator_dir: Path | None = None
    """Operator mode: ``nats-config --auth operator``'s DIR/hub (account.jwt, account-signing.nk,
    operator-signing.nk, system.creds). The hub then mints its own NATS user and every site's,
    answers the agents' bootstrap and renew requests, and revokes a deleted Site's agent; it
    replaces --nats-seed/--nats-creds."""
    bootstrap_namespace: str = ""
    """Operator mode: the namespace where the hub writes a new Site's bootstrap credential
    (Secret ``<site>-nats-bootstrap``, key ``bootstrap.creds``) for the operator to hand over;
    default: --lease-namespace (the hub's own); with neither, none (``site add`` makes them)."""
    bootstrap_lifetime: Duration = credentials.DEFAULT_BOOTSTRAP_LIFETIME.total_seconds()
    """Operator mode: how long a bootstrap credential is valid; it is single-use. The hub mints
    its Secret again before it expires, and deletes it once the agent has bootstrapped."""
    site_credential_lifetime: Duration = credentials.DEFAULT_LIFETIME.total_seconds()
    """How long a site's (and the hub's own) NATS credential is valid; agents renew well before
    (the agent's --nats-renew-before)."""

    def _nats_identities(self) -> dict[str, bool]:
        return {**super()._nats_identities(), "--nats-operator-dir": self.nats_operator_dir is not None}

    @model_validator(mode="after")
    def _bootstrap_within_memory(self) -> Self:
        if self.bootstrap_lifetime > self.site_credential_lifetime:
            raise ValueError(
                f"--bootstrap-lifetime ({self.bootstrap_lifetime:g}s) may not exceed "
                f"--site-credential-lifetime ({self.site_credential_lifetime:g}s): the hub keeps a "
                "revocation that long, and a used bootstrap must stay revoked while it is valid"
            )
        return self

    @field_validator("sealing_keys")
    @classmethod
    def _dir_with_keys(cls, v: Path) -> Path:
        if not v.is_dir() or not any(v.glob("*.key")):
            raise ValueError(f"directory {str(v)!r} holds no *.key file")
        return v

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str | None) -> str | None:
        why = labels.problem(v) if v else None
        if why is not None:
            raise ValueError(f"namespace {v!r} is not a DNS-1123 label: {why}")
        return v

    @field_validator("watch_filter")
    @classmethod
    def _watch_filter(cls, v: str) -> str:
        if len(v) > labels.MAX_LENGTH or not _LABEL_VALUE.fullmatch(v):
            raise ValueError(
                f"{v!r} is not a label value: at most 63 characters, alphanumerics, '-', '_' and '.',"
                " starting and ending with an alphanumeric"
            )
        return v

    def _check_scope(self) -> None:
        given = [self.namespace is not None, bool(self.namespace_list), self.all_namespaces]
        if sum(given) != 1:
            raise ValueError("give exactly one of --namespace NS, --namespaces a,b or --all-namespaces")

    @model_validator(mode="after")
    def _lease(self) -> Self:
        if self.leader_elect and not self.lease_namespace:
            raise ValueError("--leader-elect needs --lease-namespace")
        if self.shard and not self.lease_namespace:
            raise ValueError("--shard needs --lease-namespace (where each replica keeps its Lease)")
        if self.shard and self.leader_elect:
            raise ValueError(
                "--shard and --leader-elect exclude each other: with --shard every replica leads "
                "its share of the sites (and one of them the credential service)"
            )
        return self

    @property
    def watch_namespaces(self) -> tuple[str, ...]:
        """The namespaces watched; empty: all of them."""
        if self.namespace is not None:
            return (self.namespace,) if self.namespace else ()
        return self.namespace_list

    @model_validator(mode="after")
    def _limits(self) -> Self:
        if self.site_max_bytes < self.max_msg_size:
            raise ValueError("--site-max-bytes must be at least --max-msg-size")
        return self

    @property
    def site_limits(self) -> streams.SiteLimits:
        return streams.SiteLimits(
            max_msg_size=self.max_msg_size, max_msgs=self.site_max_msgs, max_bytes=self.site_max_bytes
        )

    @property
    def static_sites(self) -> tuple[str, ...]:
        return split(self.sites)
