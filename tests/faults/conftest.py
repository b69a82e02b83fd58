"""The fault suite (issue 11): real processes, a fault injected, then convergence and the invariants.

Everything under tests/faults carries the ``faults`` marker, so the suite runs alone with
``pytest -m faults``; it also runs in ``make test``. ``world`` is the whole topology as OS
processes (``sandbox.launcher.Topology``: nats-server, emulated clusters, Kamaji simulators,
hub, one agent per site), started once per module with one base control plane per site that
every scenario leaves Ready; each scenario creates the control planes it damages.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from sandbox.launcher import Topology, workload
from tests import helpers

_HERE = Path(__file__).resolve().parent

SITES = ("site-a", "site-b")
BASE = workload.control_plane_names(SITES, per_site=1)
"""(name, site) of the control planes every scenario leaves alone (and the invariants check)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.faults)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Topology]:
    topology = Topology(
        tmp_path_factory.mktemp("faults") / "sandbox", sites=SITES, kamaji_delay=0.3, heartbeat_interval=2.0
    )
    await topology.start()
    helpers.trust(topology.nats_url, topology.nats_ca_file)
    pids = [c.pid for c in topology.children if c.pid is not None]
    try:
        for name, site in BASE:
            await topology.create_control_plane(name, site=site)

        async def all_ready() -> bool:
            return (await topology.progress()).done

        await helpers.eventually(all_ready, within=60, every=0.2)
        yield topology
    finally:
        await topology.stop()
    assert [pid for pid in pids if alive(pid)] == []
