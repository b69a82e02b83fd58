"""The hub's configuration: every flag of ``kamaji-broker hub`` and its environment variable.

Flags win over environment variables (``KB_HUB_<FIELD>``); an invalid or missing value fails
start-up with an error naming the flag.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from common.durations import Duration
from protocol import labels, subjects


def _labels(value: str, what: str) -> str:
    for item in filter(None, (v.strip() for v in value.split(","))):
        why = labels.problem(item)
        if why:
            raise ValueError(f"{what} {item!r} is not a DNS-1123 label: {why}")
    return value


def _split(value: str) -> tuple[str, ...]:
    return tuple(sorted({v.strip() for v in value.split(",") if v.strip()}))


class HubSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KB_HUB_", extra="forbid", use_attribute_docstrings=True)

    kubeconfig: Path | None = None
    """Kubeconfig of the management cluster (or --in-cluster)."""
    in_cluster: bool = False
    nats_url: str
    """One or more NATS URLs, comma separated."""
    nats_creds: Path | None = None
    nats_seed: Path | None = None
    """The hub's NKey seed file from ``kamaji-broker nats-config``."""
    signing_key: Path
    """The Ed25519 key that signs intents (``keys generate``: signing.key)."""
    sealing_keys: Path
    """Directory of X25519 private keys (``keys generate``: sealing/); all are used to open secrets."""
    namespaces: str = ""
    """Comma-separated namespaces to watch for RemoteKamajiControlPlanes; empty with --all-namespaces."""
    all_namespaces: bool = False
    sites: str = ""
    """Sites whose streams and consumers exist even before an object references them."""
    leader_elect: bool = False
    lease_namespace: str = ""
    """Namespace of the leader-election Lease (required with --leader-elect)."""
    lease_name: str = "kamaji-broker-hub"
    lease_duration: Duration = 15.0
    identity: str = ""
    """This replica's name in the Lease (default: hostname and pid)."""
    listen: str = ":8080"
    prefix: str = subjects.DEFAULT_PREFIX
    stream_replicas: int = Field(default=1, ge=1, le=5)
    """JetStream replicas of the four streams (1 in a single server, 3 in a cluster)."""
    workers: int = Field(default=8, ge=1, le=64)
    heartbeat_interval: Duration = 10.0
    """The agents' heartbeat interval: a site counts as connected for three of them after a beat."""

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, v: str) -> str:
        return _labels(v, "namespace")

    @field_validator("sites")
    @classmethod
    def _sites(cls, v: str) -> str:
        return _labels(v, "site")

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        subjects.check_prefix(v)
        return v

    @field_validator("signing_key", "nats_seed", "nats_creds", "kubeconfig")
    @classmethod
    def _file_exists(cls, v: Path | None) -> Path | None:
        if v is not None and not v.is_file():
            raise ValueError(f"file {str(v)!r} does not exist")
        return v

    @field_validator("sealing_keys")
    @classmethod
    def _dir_with_keys(cls, v: Path) -> Path:
        if not v.is_dir() or not any(v.glob("*.key")):
            raise ValueError(f"directory {str(v)!r} holds no *.key file")
        return v

    @model_validator(mode="after")
    def _one_of_each(self) -> Self:
        if (self.nats_seed is None) == (self.nats_creds is None):
            raise ValueError("give exactly one of --nats-seed or --nats-creds")
        if (self.kubeconfig is None) == (not self.in_cluster):
            raise ValueError("give exactly one of --kubeconfig or --in-cluster")
        if bool(self.watch_namespaces) == self.all_namespaces:
            raise ValueError("give exactly one of --namespaces a,b or --all-namespaces")
        if self.leader_elect and not self.lease_namespace:
            raise ValueError("--leader-elect needs --lease-namespace")
        return self

    @property
    def watch_namespaces(self) -> tuple[str, ...]:
        return _split(self.namespaces)

    @property
    def static_sites(self) -> tuple[str, ...]:
        return _split(self.sites)

    @property
    def servers(self) -> tuple[str, ...]:
        return tuple(u.strip() for u in self.nats_url.split(",") if u.strip())
