"""The agent's configuration: every flag of ``kamaji-broker agent`` and its environment variable.

Flags win over environment variables (``KB_AGENT_<FIELD>``, e.g. ``KB_AGENT_NATS_URL``); an
invalid or missing value fails start-up with an error naming the flag.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from common.durations import Duration
from common.settings import ExistingFile, NamespaceList, ProcessSettings
from protocol import labels


class AgentSettings(ProcessSettings):
    """Read once at start; ``agent.main`` hands it to every loop beside ``agent.deps.Deps``."""

    model_config = SettingsConfigDict(env_prefix="KB_AGENT_", extra="forbid", use_attribute_docstrings=True)

    site: str
    """This site's name (a DNS-1123 label): the only intents it applies, its subjects."""
    hub_public_keys: ExistingFile
    """hub-public-keys.json from ``kamaji-broker keys generate``: keys trusted to sign intents,
    and keys to seal secrets to (the newest)."""
    namespaces: NamespaceList = ""
    """Comma-separated target namespaces of TenantControlPlanes; empty with --all-namespaces."""
    orphan_policy: Literal["delete", "report"] = "report"
    """What to do with a managed TCP whose intent is gone: ``report`` by default, because a
    TenantControlPlane is never to be lost silently (and ``deletionPolicy: Orphan`` leaves them)."""
    orphan_grace: Duration = 3600.0
    """Seconds a TCP must stay without an intent (consumer caught up) before the orphan policy acts."""
    resync_interval: Duration = 300.0
    """Seconds between anti-entropy passes (also run on every NATS reconnect)."""
    heartbeat_interval: Duration = 10.0
    """Seconds between heartbeats, from which the hub judges whether the site is connected."""
    fetch_batch: int = Field(default=64, ge=1, le=1000)
    """Intents fetched from the site's consumer per request."""
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

    @property
    def target_namespaces(self) -> tuple[str, ...]:
        return self.namespace_list
