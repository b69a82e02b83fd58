"""The hub's Prometheus metrics, on a registry of its own (one per hub, so tests can run several).

Every module of the hub counts here: intents by the publisher, statuses by ``hub.ingest.consumer``, bus
rejections by ``hub.ingest.record``, sites by ``hub.ingest.liveness``, secrets and reconcile errors by the
controllers, control planes by phase and the update-to-ready time by ``hub.controllers.rkcp.gauges``.
Labels carry sites, phases, operations, stream names and reasons only, never names of control
planes or secrets, nor their content. prometheus_client appends ``_total`` to counter names on
exposition. ``deploy/monitoring`` holds the dashboard and alerts built on these.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

FIRST_READY_BUCKETS: Final = (5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0)
"""Seconds from RKCP creation to Ready: Kamaji takes tens of seconds, an offline site hours."""
UPDATE_READY_BUCKETS: Final = (1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
"""Seconds from an update intent to Ready at its generation: a rollout of the API server pods
takes seconds to minutes; a site that is away at the time, as long as it is away."""


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        counter = functools.partial(Counter, registry=self.registry)
        gauge = functools.partial(Gauge, registry=self.registry)
        self.intents_published = counter(
            "kb_hub_intents_published", "Intents published, by site and operation", ["site", "op"]
        )
        self.status_received = counter("kb_hub_status_received", "Status messages received and decoded")
        self._latency()
        self.secrets_written = counter(
            "kb_hub_secrets_written", "Kubeconfig and CA Secrets written in the management cluster"
        )
        self.sites_connected = gauge(
            "kb_hub_sites_connected", "Known sites whose heartbeat is fresh (at most 3 intervals old)"
        )
        self.site_backlog = gauge(
            "kb_hub_site_backlog",
            "Intents not yet acknowledged by a site's agent (pending + ack pending)",
            ["site"],
        )
        self._per_site(gauge)
        self.secrets_refused = counter(
            "kb_hub_secrets_refused",
            "Sealed secrets not written for an RKCP naming their coordinates, by reason "
            "(OwnerMismatch, NotAuthorized, Conflict, Paused); once per message and RKCP",
            ["reason"],
        )
        self.reconcile_errors = counter("kb_hub_reconcile_errors", "Reconciliations that ended in an error")
        self.released_pending = gauge(
            "kb_hub_released_deletions_pending",
            "Deletions released by siteUnavailableDeletionTimeout that the site has not confirmed yet",
        )
        self.released_purged = counter(
            "kb_hub_released_deletions_purged",
            "Released deletions the site confirmed, whose messages the hub then purged",
        )
        self.bus_rejected = counter(
            "kb_hub_bus_rejected",
            "Messages from the bus the hub could not use, by stream and reason",
            ["stream", "reason"],
        )
        self._credentials(counter)

    def _latency(self) -> None:
        """How long control planes take to be Ready, by site (a slow site shows as itself)."""
        self.first_ready_seconds = Histogram(
            "kb_hub_first_ready_seconds",
            "Seconds from RKCP creation to its first Ready, by site",
            ["site"],
            buckets=FIRST_READY_BUCKETS,
            registry=self.registry,
        )
        self.update_ready_seconds = Histogram(
            "kb_hub_update_ready_seconds",
            "Seconds from the publish of an update intent (a newer generation of a control plane "
            "already provisioned) to the site's Ready at that generation, by site",
            ["site"],
            buckets=UPDATE_READY_BUCKETS,
            registry=self.registry,
        )

    def _per_site(self, gauge: Any) -> None:
        """What the leader knows of each site and of the control planes placed there."""
        self.site_connected = gauge(
            "kb_hub_site_connected", "1 while a site's heartbeat is fresh (at most 3 intervals old)", ["site"]
        )
        self.site_heartbeat_age = gauge(
            "kb_hub_site_heartbeat_age_seconds",
            "Age of a site's latest heartbeat at the hub's last poll, to within the poll interval "
            "(absent before the first)",
            ["site"],
        )
        self.control_planes = gauge(
            "kb_hub_control_planes",
            "RKCPs by site and the phase the site reports (Unknown: no status yet; Deleting; "
            "NotAuthorized, counted without a site: the placement is not the site's)",
            ["site", "phase"],
        )
        self.secrets_not_synced = gauge(
            "kb_hub_secrets_not_synced",
            "RKCPs Ready at their site whose kubeconfig and CA Secrets do not carry the site's "
            "latest secrets in the management cluster",
            ["site"],
        )

    def site_seen(self, site: str, *, connected: bool, heartbeat_age: float | None) -> None:
        self.site_connected.labels(site=site).set(1 if connected else 0)
        if heartbeat_age is not None:
            self.site_heartbeat_age.labels(site=site).set(max(0.0, heartbeat_age))

    def forget_site(self, site: str) -> None:
        """A site no longer known: its series go (a deleted site leaves no stale gauge)."""
        for gauge in (self.site_backlog, self.site_connected, self.site_heartbeat_age):
            with contextlib.suppress(KeyError):
                gauge.remove(site)

    def clear_leader_gauges(self) -> None:
        """The gauges only a leader's term keeps current, emptied when the term ends: a standby
        replica shows none, so a sum over replicas counts each control plane once."""
        for gauge in (
            self.site_backlog, self.site_connected, self.site_heartbeat_age,
            self.control_planes, self.secrets_not_synced,
        ):  # fmt: skip
            gauge.clear()
        self.sites_connected.set(0)

    def _credentials(self, counter: Any) -> None:
        """Operator mode: the credential service's requests and the keys it revoked."""
        self.credential_requests = counter(
            "kb_hub_credential_requests",
            "Site credential requests (operator mode), by kind (bootstrap, renew) and result "
            "(granted, refused, unanswerable: a reply subject outside the site's inbox)",
            ["kind", "result"],
        )
        self.credentials_revoked = counter(
            "kb_hub_credentials_revoked",
            "NATS user keys the hub revoked (used bootstraps, replaced keys, deleted sites)",
        )
