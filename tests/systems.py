"""The whole system as processes with its base control planes Ready: the one fixture body that
tests/e2e and tests/faults share.

``running`` starts ``sandbox.launcher.System`` (nats-server, emulated clusters, Kamaji
simulators, hub, one agent per site), trusts its CA, provisions the base control planes and
waits until they are Ready; on the way out it stops everything and asserts that no process it
started outlives ``stop()`` (part of what the suites test).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from common.kube import resources
from sandbox.launcher import Options, System, invariants
from tests import helpers

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE

BACKENDS = ("emulator", "real")
"""What runs the clusters (``sandbox.launcher.Options.kubernetes``): a fixture parametrized by
these runs its tests on both."""


BOTH = pytest.mark.parametrize("world", BACKENDS, indirect=True, scope="module")
"""A module's mark: its ``world`` (a fixture that reads ``backend``) on both backends."""


def backend(request: pytest.FixtureRequest) -> str:
    """The backend of a fixture parametrized by ``BACKENDS`` (the emulator when it is not); for
    ``real`` the binaries must be there (``real_binaries``: skipped with why where they are
    missing, failed in CI)."""
    kubernetes = str(getattr(request, "param", "emulator"))
    if kubernetes == "real":
        request.getfixturevalue("real_binaries")
    return kubernetes


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@contextlib.asynccontextmanager
async def running(
    directory: Path, *, sites: Sequence[str], base: Sequence[tuple[str, str]], **options: Any
) -> AsyncIterator[System]:
    """``options`` are ``sandbox.launcher.Options`` fields (e.g. ``nats_nodes=3``, ``hub_replicas=2``,
    ``kamaji_delay=1.0``)."""
    settings: dict[str, Any] = {"kamaji_delay": 0.3, "heartbeat_interval": 2.0, **options}
    system = System(directory, Options(sites=tuple(sites), **settings))
    await system.start()
    # Clients of the tests verify this system's servers with the CA its nats-config made.
    for url in system.nats_urls:
        helpers.trust(url, system.nats_ca_file)
    pids = [c.pid for c in system.children if c.pid is not None]
    try:
        for name, site in base:
            await system.create_control_plane(name, site=site)

        async def all_ready() -> bool:
            return (await system.progress()).done

        await helpers.eventually(all_ready, within=60, every=0.2)
        yield system
    finally:
        await system.stop()
        for url in system.nats_urls:
            helpers.untrust(url)
    # stop() is part of what is tested: by PID, nothing it started may outlive it.
    assert [pid for pid in pids if alive(pid)] == []


async def update_control_plane(
    world: System, name: str, *, namespace: str = "default", **spec: Any
) -> dict[str, Any]:
    """Merge ``spec`` into RKCP ``name``'s spec (e.g. ``version="v1.32.0"``, ``replicas=3``)."""
    return await world.mgmt.patch(RKCP, name, {"spec": spec}, namespace=namespace)


async def delete_control_plane(world: System, name: str, *, namespace: str = "default") -> None:
    """Delete RKCP ``name`` and then its Cluster, as CAPI's Cluster controller does.

    Returns at once; the RKCP goes away when the hub has seen the TCP deleted at its site.
    """
    await world.mgmt.delete(RKCP, name, namespace=namespace)
    await world.mgmt.delete(resources.CLUSTER, name, namespace=namespace)


async def delete_all(world: System, names: Sequence[str], site: str, *, namespace: str = "default") -> None:
    """Leave the world as a scenario found it: control planes ``names`` (at ``site``) deleted, and
    the invariants of ``sandbox.launcher.invariants`` holding."""
    for name in names:
        await delete_control_plane(world, name, namespace=namespace)
    deleted = [(namespace, name, site) for name in names]

    async def gone() -> bool:
        return await invariants.converged(world, deleted=deleted)

    await helpers.eventually(gone, within=120, every=0.5)
    assert await invariants.violations(world, deleted=deleted) == []
