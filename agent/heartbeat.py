"""The agent's heartbeat: liveness and a summary on ``kb.site.<site>`` every interval.

``new_heartbeat`` is the pure constructor; ``Heartbeat`` is the shell that gathers the counts
(from callables the agent wires to its loops), probes whether the site serves Kamaji's
TenantControlPlane resource, and publishes through ``agent.publishing.Publisher`` (the
site's stream KB_SITE_<site> keeps the latest, so the hub sees the current one). A failed publish is
logged and the next beat tries again: a heartbeat never ends the agent.

Talks to: NATS (publish on the site's own heartbeat subject), the site's API server (one list
that matches nothing, at most every ``detect_interval`` seconds).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from typing import Final

from agent import __version__
from agent.deps import Deps
from agent.settings import AgentSettings
from agent.tcp import managed as tcps
from common import logs
from common.bus import errors as bus_errors
from common.kube import errors as kerrors
from protocol import messages

log = logging.getLogger(__name__)

PROBE_SELECTOR: Final = f"{tcps.DOMAIN}/probe=none"
"""Matches no object: the probe asks only whether the resource is served, at the cost of an empty list."""
DETECT_TIMEOUT: Final = 10.0
"""Seconds a Kamaji probe may take: the beat waits for it, and an API server that took the
connection and never answers must not stop the beats (the hub, and doctor, take a site without
them for one whose agent is gone). The client has no bound of its own."""


def new_heartbeat(
    *,
    site: str,
    agent_version: str,
    started_at: dt.datetime,
    now: dt.datetime,
    managed: int,
    ready: int,
    last_intent_seq: int,
    kamaji_detected: bool,
    trusted_key_ids: tuple[str, ...] = (),
    interval: float = 0.0,
) -> messages.Heartbeat:
    # Counts are clamped at zero: msgspec checks the NonNegative constraints only when decoding,
    # so a negative here would be published and then refused by the hub.
    return messages.Heartbeat(
        site=site,
        agent_version=agent_version,
        started_at=started_at,
        sent_at=now,
        managed=max(0, managed),
        ready=max(0, ready),
        last_intent_seq=max(0, last_intent_seq),
        kamaji_detected=kamaji_detected,
        trusted_key_ids=tuple(sorted(trusted_key_ids)),
        interval=max(0.0, interval),
    )


class Heartbeat:
    def __init__(
        self,
        settings: AgentSettings,
        deps: Deps,
        *,
        counts: Callable[[], tuple[int, int]],
        last_intent_seq: Callable[[], int],
        agent_version: str = __version__,
        detect_interval: float = 60.0,
    ) -> None:
        self.settings = settings
        self.deps = deps
        self.counts = counts
        """(managed, ready): TCPs of this site and those Ready (the status loop's ``counts``)."""
        self.last_intent_seq = last_intent_seq
        """Highest intent stream sequence handled (``ApplyLoop.last_seq``)."""
        self.agent_version = agent_version
        self.detect_interval = detect_interval
        """Seconds between Kamaji probes: a CRD appears rarely, a beat is every 10 s."""
        self.detect_timeout = DETECT_TIMEOUT
        self.started_at = messages.utcnow()
        self.trusted_key_ids = deps.hub_keys.trusted_key_ids()
        """Ids of the hub signing keys the agent verifies intents with (the hub shows them on the Site)."""
        self.beats = 0
        """Heartbeats the server acknowledged."""
        self.failures = 0
        """Heartbeats that could not be published."""
        self._detected = False
        self._probed_at: float | None = None
        self._failing = False

    async def run(self) -> None:
        """Beat every ``heartbeat_interval`` seconds (default 10 s; the hub judges liveness from it), on a
        fixed schedule, until cancelled."""
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            try:
                await self.beat()
            except bus_errors.BusError as exc:
                self.failures += 1
                # Once per outage at warning level: a disconnected agent would otherwise log
                # the same line every interval.
                about = logs.about(site=self.settings.site)
                (log.debug if self._failing else log.warning)("heartbeat not published: %s", exc, extra=about)
                self._failing = True
            else:
                if self._failing:
                    log.info("heartbeat published again", extra=logs.about(site=self.settings.site))
                self._failing = False
            due = max(due + self.settings.heartbeat_interval, loop.time())
            await asyncio.sleep(due - loop.time())

    async def beat(self) -> messages.Heartbeat:
        """Publish one heartbeat now (BusError when the server did not take it)."""
        managed, ready = self.counts()
        beat = new_heartbeat(
            site=self.settings.site,
            agent_version=self.agent_version,
            started_at=self.started_at,
            now=messages.utcnow(),
            managed=managed,
            ready=ready,
            last_intent_seq=self.last_intent_seq(),
            kamaji_detected=await self.kamaji_detected(),
            trusted_key_ids=self.trusted_key_ids,
            interval=self.settings.heartbeat_interval,
        )
        await self.deps.publisher.heartbeat(beat)
        self.beats += 1
        return beat

    async def kamaji_detected(self) -> bool:
        """Whether the site serves tenantcontrolplanes.kamaji.clastix.io (cached ``detect_interval``)."""
        now = asyncio.get_running_loop().time()
        if self._probed_at is not None and now - self._probed_at < self.detect_interval:
            return self._detected
        # The first target namespace: a namespaced Role cannot list cluster-wide.
        namespaces = self.settings.target_namespaces
        namespace = namespaces[0] if namespaces else None
        try:
            async with asyncio.timeout(self.detect_timeout):
                await self.deps.kube.list(tcps.TCP, namespace=namespace, label_selector=PROBE_SELECTOR)
        except kerrors.NotFound:
            detected = False
        except (kerrors.KubeError, TimeoutError) as exc:
            # Unreachable or forbidden says nothing about Kamaji: keep what we knew, ask again soon.
            why = exc if not isinstance(exc, TimeoutError) else f"no answer within {self.detect_timeout:g}s"
            log.warning("cannot tell whether Kamaji is installed: %s", why)
            return self._detected
        else:
            detected = True
        if self._probed_at is None or detected != self._detected:
            log.info("Kamaji TenantControlPlane resource %s", "found" if detected else "not served")
        self._detected, self._probed_at = detected, now
        return detected
