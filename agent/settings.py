"""The agent's configuration: every flag of ``kamaji-broker agent`` and its environment variable.

Flags win over environment variables (``KB_AGENT_<FIELD>``, e.g. ``KB_AGENT_NATS_URL``); an
invalid or missing value fails start-up with an error naming the flag.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from common.durations import Duration
from protocol import labels, subjects


class AgentSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KB_AGENT_", extra="forbid", use_attribute_docstrings=True)

    site: str
    """This site's name (a DNS-1123 label): the only intents it applies, its subjects."""
    nats_url: str
    """One or more NATS URLs, comma separated."""
    nats_seed: Path | None = None
    """The site's NKey seed file from ``kamaji-broker site add``."""
    nats_creds: Path | None = None
    """A .creds file instead of a seed (servers in operator/JWT mode)."""
    hub_public_keys: Path
    """hub-public-keys.json from ``kamaji-broker keys generate``: keys trusted to sign intents,
    and keys to seal secrets to (the newest)."""
    kubeconfig: Path | None = None
    in_cluster: bool = False
    namespaces: str = ""
    """Comma-separated target namespaces the agent may manage; empty with all_namespaces."""
    all_namespaces: bool = False
    orphan_policy: Literal["delete", "report"] = "report"
    """What to do with a managed TCP whose intent is gone: ``report`` by default, because a
    TenantControlPlane is never to be lost silently (and ``deletionPolicy: Orphan`` leaves them)."""
    orphan_grace: Duration = 3600.0
    """Seconds a TCP must stay without an intent (consumer caught up) before the orphan policy acts."""
    resync_interval: Duration = 300.0
    """Seconds between anti-entropy passes (also run on every NATS reconnect)."""
    listen: str = ":8080"
    prefix: str = subjects.DEFAULT_PREFIX
    heartbeat_interval: Duration = 10.0
    fetch_batch: int = Field(default=64, ge=1, le=1000)
    namespace_retry: Duration = 60.0
    """Seconds before an intent whose namespace is missing is tried again (a site admin may create it)."""
    status_min_interval: Duration = 0.5
    """Coalescing window: at most one Status per TCP per this many seconds."""

    @field_validator("site")
    @classmethod
    def _site_is_a_label(cls, v: str) -> str:
        why = labels.problem(v)
        if why:
            raise ValueError(f"site {v!r} is not a DNS-1123 label: {why}")
        return v

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        subjects.check_prefix(v)
        return v

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, v: str) -> str:
        for ns in filter(None, (n.strip() for n in v.split(","))):
            why = labels.problem(ns)
            if why:
                raise ValueError(f"namespace {ns!r} is not a DNS-1123 label: {why}")
        return v

    @field_validator("hub_public_keys", "nats_seed", "nats_creds", "kubeconfig")
    @classmethod
    def _file_exists(cls, v: Path | None) -> Path | None:
        if v is not None and not v.is_file():
            raise ValueError(f"file {str(v)!r} does not exist")
        return v

    @model_validator(mode="after")
    def _one_of_each(self) -> Self:
        if (self.nats_seed is None) == (self.nats_creds is None):
            raise ValueError("give exactly one of --nats-seed or --nats-creds")
        if (self.kubeconfig is None) == (not self.in_cluster):
            raise ValueError("give exactly one of --kubeconfig or --in-cluster")
        if bool(self.target_namespaces) == self.all_namespaces:
            raise ValueError("give exactly one of --namespaces a,b or --all-namespaces")
        return self

    @property
    def target_namespaces(self) -> tuple[str, ...]:
        return tuple(sorted({n.strip() for n in self.namespaces.split(",") if n.strip()}))

    @property
    def servers(self) -> tuple[str, ...]:
        return tuple(u.strip() for u in self.nats_url.split(",") if u.strip())
