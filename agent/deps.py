"""What the agent's loops share, built once by ``agent.main``: one frozen struct, not a dozen arguments.

Each loop takes the ``AgentSettings`` (what was configured) and these ``Deps`` (what was
connected or created at start); tests build both with ``tests/agent/wiring.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent import metrics as agent_metrics
from agent import publishing
from agent.tcp import desires as agent_desires
from common import bus, health
from common.kube import Kube
from protocol import keys


@dataclass(frozen=True)
class Deps:
    conn: bus.Connection
    """The agent's NATS connection (its site's credentials)."""
    kube: Kube
    """The site's API server."""
    publisher: publishing.Publisher
    """Status, SealedSecrets and Heartbeat onto the site's subjects, over ``conn``."""
    hub_keys: keys.HubPublicKeys
    """The hub's public keys: signing keys to verify intents with (``verify_keys()``, retired ones
    refused), sealing keys to seal secrets to."""
    metrics: agent_metrics.Metrics
    readiness: health.Readiness
    """/readyz: each loop declares and sets its own check."""
    desires: agent_desires.Desires = field(default_factory=agent_desires.Desires)
    """The spec last applied to each TCP (``agent.tcp.desires``): the apply and cleanup loops write
    it, the status loop measures drift from it."""
