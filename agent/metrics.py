"""The agent's Prometheus metrics, on a registry of its own (one per agent, so tests can run
several). Labels carry outcomes and operations only, never names of secrets or their content."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from protocol import keys


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.intents = Counter(
            "kb_agent_intents", "Intents handled, by operation and result", ["op", "result"], registry=r
        )
        self.intents_rejected = Counter(
            "kb_agent_intents_rejected",
            "Intents refused, by reason (oversized, undecodable, unsupported_schema, invalid, unsigned, "
            "untrusted_key, bad_signature, wrong_site, wrong_subject, stale_generation)",
            ["reason"],
            registry=r,
        )
        self.apply_seconds = Histogram("kb_agent_apply_seconds", "Time to apply one intent", registry=r)
        self.status_published = Counter("kb_agent_status_published", "Status messages published", registry=r)
        self.secrets_published = Counter(
            "kb_agent_secrets_published", "SealedSecrets messages published", registry=r
        )
        self.managed_tcps = Gauge(
            "kb_agent_managed_tcps", "TenantControlPlanes managed at this site", registry=r
        )
        self.consumer_pending = Gauge(
            "kb_agent_consumer_pending", "Intents not yet delivered to this agent", registry=r
        )
        self.orphans = Counter("kb_agent_orphans", "Orphaned TCPs handled, by action", ["action"], registry=r)
        self.nats_connected = Gauge("kb_agent_nats_connected", "1 when connected to NATS", registry=r)
        self.drift_reverted = Counter(
            "kb_agent_drift_reverted",
            "TCP specs re-applied after drift (an edit, or a deletion at the site)",
            registry=r,
        )
        self.credential_expiry = Gauge(
            "kb_agent_nats_credential_expiry_timestamp_seconds",
            "Unix time at which this site's NATS JWT expires (operator mode; renewed well before)",
            registry=r,
        )
        self.info = Gauge(
            "kb_agent_info",
            "1, labelled with the agent's site and version: join other kb_agent_* series on it "
            "(on instance) to see them by site",
            ["site", "version"],
            registry=r,
        )
        self.hub_keys = Gauge(
            "kb_agent_hub_key",
            "Hub key ids this agent uses (1): signing keys it trusts, the sealing key it seals to",
            ["use", "key_id"],
            registry=r,
        )

    def trust(self, hub_keys: keys.HubPublicKeys) -> None:
        """Show which hub keys this site trusts and seals to (key ids are public, not secrets):
        during a rotation, the way to see that every site has the new keys."""
        for kid in hub_keys.trusted_key_ids():
            self.hub_keys.labels(use="signing", key_id=kid).set(1)
        if any(k.key_id not in hub_keys.retired for k in hub_keys.sealing):
            self.hub_keys.labels(use="sealing", key_id=hub_keys.newest_sealing().key_id).set(1)
