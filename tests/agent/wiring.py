"""Building the agent's loops as ``agent.main`` wires them: its settings and its ``Deps``.

One way for every test (tests/agent, tests/hub, tests/security) to get an ``AgentSettings`` and
a ``Deps``, so a loop's constructor is typed once here and not in each test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent import metrics as agent_metrics
from agent import publishing
from agent.deps import Deps
from agent.settings import AgentSettings
from common import bus, health
from common import kube as ckube
from protocol import keys, subjects
from tests.agent.conftest import SITE


def settings(
    *,
    site: str = SITE,
    namespaces: tuple[str, ...] = (),
    prefix: str = subjects.DEFAULT_PREFIX,
    **fields: Any,
) -> AgentSettings:
    """The agent's settings, validated as the CLI's are; ``fields`` override the flags' defaults.

    The loops read neither the NATS credentials nor the hub's key file (the process's wiring
    does), so this very file stands in for both; ``namespaces`` empty means all namespaces.
    """
    here = Path(__file__)
    return AgentSettings(
        site=site,
        namespaces=",".join(namespaces),
        all_namespaces=not namespaces,
        prefix=prefix,
        nats_url="nats://127.0.0.1:4222",
        nats_seed=here,
        hub_public_keys=here,
        in_cluster=True,
        **fields,
    )


def deps(
    conn: bus.Connection,
    kube: ckube.Kube,
    hub_keys: keys.HubPublicKeys,
    *,
    site: str = SITE,
    prefix: str = subjects.DEFAULT_PREFIX,
    metrics: agent_metrics.Metrics | None = None,
    readiness: health.Readiness | None = None,
) -> Deps:
    """What the loops share; fresh metrics and readiness unless the test keeps its own."""
    return Deps(
        conn=conn,
        kube=kube,
        publisher=publishing.Publisher(conn, site=site, prefix=prefix),
        hub_keys=hub_keys,
        metrics=metrics or agent_metrics.Metrics(),
        readiness=readiness or health.Readiness(),
    )
