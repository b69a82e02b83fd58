"""`kamaji-broker hub` as real processes: flags, health, and leader election between two replicas,
on an emulated management cluster and on a real one (as the ServiceAccount deploy/hub makes)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from common import bus
from common import kube as ckube
from common.files import keys
from common.kube import resources
from protocol import messages, streams, subjects
from sandbox import natsd
from sandbox.launcher import installs
from tests import conftest, helpers
from tests.hub import clusters
from tests.hub.conftest import GRANT, RKCP, SITE, cluster_obj, rkcp_obj, site_obj

LEASE = "kamaji-broker-hub"


def hub_process(args: list[str], log: Path, identity: str) -> helpers.CliProcess:
    return helpers.CliProcess("hub", args, log=log, env={"KB_HUB_IDENTITY": identity})


@dataclass(frozen=True)
class Mgmt:
    """The management cluster of a test: the admin's client, the hub's kubeconfig, and the
    hub's own namespace (its Lease, its bootstrap credentials: on a real cluster the only one
    where its Roles grant those)."""

    kube: ckube.Kube
    hub_kubeconfig: Path
    lease_namespace: str


@pytest.fixture
async def mgmt(real_backend: clusters.RealPair | None, tmp_path: Path) -> AsyncIterator[Mgmt]:
    """An emulated management cluster (the hub is its admin), or the session's real one, where
    the hub is the ServiceAccount ``deploy/hub`` made, its Lease in its own namespace (the only
    one its Role grants); with the Site of site-a."""
    async with contextlib.AsyncExitStack() as stack:
        if real_backend is None:
            c = await stack.enter_async_context(clusters.emulated(tmp_path))
            lease_namespace = "default"
        else:
            c = await stack.enter_async_context(clusters.real(real_backend))
            lease_namespace = installs.SYSTEM_NAMESPACE
        kube = ckube.Kube(await ckube.api_client_from_kubeconfig(c.mgmt))
        stack.push_async_callback(kube.close)
        stack.push_async_callback(kube.delete, resources.LEASE, LEASE, namespace=lease_namespace)
        await kube.create(resources.SITE, site_obj(SITE, GRANT))
        yield Mgmt(kube, c.hub, lease_namespace)


@pytest.fixture
def nats_of_its_own(tmp_path: Path) -> Iterator[tuple[natsd.NatsServer, Path]]:
    """A nats-server in operator mode for one test: it counts every intent in the stream, and
    runs once per backend (the module's ``secured_nats`` would hold the other run's)."""
    server, conf = conftest.operator_mode_server(tmp_path / "nats")
    server.start()
    yield server, conf
    server.stop()


def hub_args(server: natsd.NatsServer, conf: Path, keys_dir: Path, mgmt: Mgmt) -> list[str]:
    return [
        "--kubeconfig", str(mgmt.hub_kubeconfig), "--nats-url", server.url,
        *helpers.identity_flag(helpers.identity_file(conf, "hub")),
        "--signing-key", str(keys_dir / keys.SIGNING_FILE),
        "--sealing-keys", str(keys_dir / keys.SEALING_DIR),
        "--all-namespaces", "--sites", "site-a", "--leader-elect",
        "--lease-namespace", mgmt.lease_namespace, "--lease-duration", "2",
    ]  # fmt: skip


async def test_two_replicas_one_leader_and_a_takeover_publishes_nothing_twice(
    nats_of_its_own: tuple[natsd.NatsServer, Path], mgmt: Mgmt, tmp_path: Path
) -> None:
    server, conf = nats_of_its_own
    kube = mgmt.kube
    keys.generate(tmp_path / "keys")
    args = hub_args(server, conf, tmp_path / "keys", mgmt)
    hubs = {name: hub_process(args, tmp_path / f"{name}.log", name) for name in ("hub-1", "hub-2")}
    reader = await bus.connect(
        helpers.options(server.url, seed_file=helpers.identity_file(conf, "hub")), deadline=10
    )
    try:
        holder: list[str] = []

        async def leader_elected() -> bool:
            lease = await kube.get_or_none(resources.LEASE, LEASE, namespace=mgmt.lease_namespace)
            holder[:] = [((lease or {}).get("spec") or {}).get("holderIdentity") or ""]
            return holder[0] in hubs

        await helpers.eventually(leader_elected, within=30)
        first = holder[0]
        cl = await kube.create(resources.CLUSTER, cluster_obj("c1"), namespace="default")
        await kube.create(RKCP, rkcp_obj("cp1", cluster=cl), namespace="default")
        await helpers.eventually(lambda: _intent_count(reader, 1), within=30)
        # Both must be serving before they are asked (a loaded machine starts the standby late).
        other = next(n for n in hubs if n != first)
        assert f"leading as {first}" in await hubs[first].readyz(lambda _, text: "leading" in text)
        assert "standby" in await hubs[other].readyz(lambda _, text: "standby" in text)

        # The leader dies without releasing its Lease. (Stopping runs in a thread: the emulator
        # lives on this event loop, and a stopping hub still talks to it to release the Lease.)
        assert await asyncio.to_thread(hubs[first].stop, signal.SIGKILL) != 0
        await helpers.eventually(lambda: _holder_is(mgmt, other), within=30)
        cl2 = await kube.create(resources.CLUSTER, cluster_obj("c2"), namespace="default")
        await kube.create(RKCP, rkcp_obj("cp2", cluster=cl2), namespace="default")
        await helpers.eventually(lambda: _intent_count(reader, 2), within=30)
        # A change of cp1 is published once, as the third message: the new leader had reconciled
        # cp1 by then (one reconcile per key at a time), so a re-publish of cp1's old intent on
        # taking over would have shown up before it.
        await kube.patch(RKCP, "cp1", {"spec": {"version": "v1.31.1"}}, namespace="default")
        await helpers.eventually(lambda: _last_seq(reader, 3), within=30, what="cp1's change published")
        info = await bus.stream_info(reader, streams.stream_name(subjects.Kind.INTENT))
        assert (info.messages, info.last_seq) == (2, 3)  # the latest intent per subject
        for name, version in (("cp1", "v1.31.1"), ("cp2", "v1.31.0")):
            stored = await bus.last_message(reader, "KB_INTENTS", subjects.intent("site-a", "tenants", name))
            assert stored is not None
            intent = messages.decode_intent(stored.data)
            assert intent.name == name and intent.spec["kubernetes"]["version"] == version
        assert await asyncio.to_thread(hubs[other].stop) == 0
        lease = await kube.get(resources.LEASE, LEASE, namespace=mgmt.lease_namespace)
        assert not lease["spec"].get("holderIdentity")  # released on a clean shutdown
    finally:
        for h in hubs.values():
            await asyncio.to_thread(h.stop)
        await reader.close()


def test_bad_hub_flags_name_the_flag(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kamaji_broker.cli", "hub", "--nats-url", "nats://127.0.0.1:1",
         "--sealing-keys", str(tmp_path), "--namespaces", "Bad_NS", "--leader-elect"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 2
    assert "--signing-key: required" in out.stderr
    assert "--sealing-keys: directory" in out.stderr and "holds no *.key file" in out.stderr
    assert "--namespaces: namespace 'Bad_NS' is not a DNS-1123 label" in out.stderr


async def _intent_count(conn: bus.Connection, n: int) -> bool:
    try:
        info = await bus.stream_info(conn, "KB_INTENTS")
    except Exception:
        return False
    return bool(info.messages == n)


async def _last_seq(conn: bus.Connection, seq: int) -> bool:
    try:
        info = await bus.stream_info(conn, "KB_INTENTS")
    except Exception:
        return False
    return bool(info.last_seq >= seq)


async def _holder_is(mgmt: Mgmt, name: str) -> bool:
    lease = await mgmt.kube.get_or_none(resources.LEASE, LEASE, namespace=mgmt.lease_namespace)
    return bool(((lease or {}).get("spec") or {}).get("holderIdentity") == name)
