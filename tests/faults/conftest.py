"""The fault suite: real processes, a fault injected, then convergence and the invariants.

Everything under tests/faults carries the ``faults`` marker, so the suite runs alone with
``pytest -m faults``; it also runs in ``make test``. ``world`` is the whole system as OS
processes (``sandbox.launcher.System``: nats-server, emulated clusters, Kamaji simulators,
hub, one agent per site), started once per module with one base control plane per site that
every scenario leaves Ready; each scenario creates the control planes it damages. ``fault``
(``tests.faults.measure.Measure``) times each scenario from lifting its fault to convergence and
asserts the invariants of ``sandbox.launcher.invariants``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from sandbox.launcher import System, workload
from tests import systems
from tests.faults.measure import Measure

_HERE = Path(__file__).resolve().parent

FAULTS_TIMEOUT = 600
"""pytest-timeout's ceiling for one fault scenario (a unit test's is 30 s, a process test's 120 s)."""

SITES = ("site-a", "site-b")
BASE = workload.control_plane_names(SITES, per_site=1)
"""(name, site) of the control planes every scenario leaves alone (and the invariants check)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.faults)
            if item.get_closest_marker("timeout") is None:
                # A scenario's first test also carries its module's system start (over 100 s
                # on two busy cores); convergence itself is bounded by each scenario's wait.
                item.add_marker(pytest.mark.timeout(FAULTS_TIMEOUT))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[System]:
    """On the emulator, or on both backends in a module marked ``systems.BOTH``."""
    kubernetes = systems.backend(request)
    directory = tmp_path_factory.mktemp("faults") / "sandbox"
    async with systems.running(directory, sites=SITES, base=BASE, kubernetes=kubernetes) as system:
        yield system


@pytest.fixture
def fault(request: pytest.FixtureRequest) -> Measure:
    """This scenario's clock and verdict (``tests.faults.measure``), named by its test."""
    return Measure(scenario=request.node.name)
