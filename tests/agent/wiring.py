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
    """The agent's settings as its loops read them; ``fields`` override the defaults (seconds).

    Built without validation (``model_construct``): the loops never read the files a process
    needs (hub keys, NATS seed, kubeconfig), which validation would require to exist. The
    defaults are the flags' defaults, as ``kamaji-broker agent`` has them.
    """
    return AgentSettings.model_construct(
        site=site,
        namespaces=",".join(namespaces),
        all_namespaces=not namespaces,
        prefix=prefix,
        nats_url="nats://unused:4222",
        hub_public_keys=Path("unused-hub-public-keys.json"),
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
