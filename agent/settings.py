"""The agent's configuration: every flag of ``kamaji-broker agent`` and its environment variable.

Flags win over environment variables (``KB_AGENT_<FIELD>``, e.g. ``KB_AGENT_NATS_URL``); an
invalid or missing value fails start-up with an error naming the flag.
"""

from __future__ import annotations

from pathlib import Path
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
    """What to do with a managed TCP whose intent is gone: ``report`` it (a log line, a metric and
    a Warning Event) or ``delete`` it. ``report`` by default, because a TenantControlPlane is never
    to be lost silently (and ``deletionPolicy: Orphan`` leaves them)."""
    orphan_grace: Duration = 3600.0
    """Seconds a TCP must stay without an intent (consumer caught up) before the orphan policy acts."""
    resync_interval: Duration = 300.0
    """Seconds between anti-entropy passes (also run on every NATS reconnect)."""
    heartbeat_interval: Duration = 10.0
    """Seconds between heartbeats, from which the hub judges whether the site is connected. Each
    heartbeat carries it, so ``kamaji-broker status`` judges the agent by its own interval."""
    fetch_batch: int = Field(default=64, ge=1, le=1000)
    """Intents fetched from the site's consumer per request."""
    namespace_retry: Duration = 60.0
    """Seconds before an intent the site refused for what it may change is tried again: its namespace
    missing (a site admin may create it), Kamaji's webhook denying it, a field its CRD lacks."""
    status_min_interval: Duration = 0.5
    """Coalescing window: at most one Status per TCP per this many seconds."""

    nats_identity_secret: str | None = None
    """Operator mode: ``NAMESPACE/NAME`` of the Secret at this site where the agent keeps its own
    user NKey seed (made here at first start, never sent anywhere) and its current JWT; the
    chart's is ``<release namespace>/<release>-identity``. Instead of --nats-seed/--nats-creds."""
    nats_bootstrap_creds: Path | None = None
    """Operator mode: the bootstrap .creds the operator handed over, used only while the identity
    Secret holds no valid JWT. Read when needed, not at start: it is single-use, and may be gone
    once the site has joined."""
    nats_renew_before: Duration | None = None
    """Operator mode: renew the JWT when less than this is left of it; by default a third of its
    lifetime (8 h of the hub's 24 h), time enough to outlast a hub that is down for a while."""

    @field_validator("nats_identity_secret")
    @classmethod
    def _namespace_and_name(cls, v: str | None) -> str | None:
        if v is None:
            return v
        namespace, slash, name = v.partition("/")
        if not slash:
            raise ValueError(f"nats identity secret {v!r}: give NAMESPACE/NAME")
        for what, item in (("namespace", namespace), ("name", name)):
            why = labels.problem(item)
            if why:
                raise ValueError(
                    f"nats identity secret {v!r}: {what} {item!r} is not a DNS-1123 label: {why}"
                )
        return v

    def _check_nats_identity(self) -> None:
        if self.nats_bootstrap_creds is not None and self.nats_identity_secret is None:
            raise ValueError(
                "--nats-bootstrap-creds is for operator mode: give it with --nats-identity-secret "
                "(where the agent keeps its own key), instead of --nats-seed or --nats-creds"
            )
        super()._check_nats_identity()

    def _nats_identities(self) -> dict[str, bool]:
        return {**super()._nats_identities(), "--nats-identity-secret": self.operator_mode}

    @property
    def operator_mode(self) -> bool:
        """The agent keeps its own key and asks the hub for its JWTs."""
        return self.nats_identity_secret is not None

    @property
    def identity_secret(self) -> tuple[str, str]:
        """(namespace, name) of --nats-identity-secret."""
        if self.nats_identity_secret is None:
            raise ValueError("not in operator mode: --nats-identity-secret is not set")
        namespace, _, name = self.nats_identity_secret.partition("/")
        return namespace, name

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
