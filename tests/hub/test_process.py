"""`kamaji-broker hub` as real processes: flags, health, and leader election between two replicas."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from common import bus, keyfiles
from common import kube as ckube
from common.kube import resources
from hub import crdgen
from protocol import messages, streams, subjects
from sandbox import kubeapi, natsd
from tests import helpers
from tests.hub.conftest import GRANT, RKCP, ROOT, SITE, cluster_obj, rkcp_obj, site_obj


def hub_process(args: list[str], log: Path, identity: str) -> helpers.CliProcess:
    return helpers.CliProcess("hub", args, log=log, env={"KB_HUB_IDENTITY": identity})


@pytest.fixture
async def mgmt(tmp_path: Path) -> AsyncIterator[tuple[kubeapi.Server, ckube.Kube, Path]]:
    server = kubeapi.Server(name="mgmt")
    await server.start(port=0)
    for path in [
        ROOT / "sandbox" / "crds" / "cluster.yaml",
        ROOT / "deploy" / "crds" / crdgen.FILENAME,
        ROOT / "deploy" / "crds" / crdgen.SITE_FILENAME,
    ]:
        await server.apply_crd(yaml.safe_load(path.read_text()))
    kubeconfig = server.write_kubeconfig(tmp_path / "mgmt.kubeconfig")
    api = await ckube.api_client_from_kubeconfig(kubeconfig)
    await ckube.Kube(api).create(resources.SITE, site_obj(SITE, GRANT))
    yield server, ckube.Kube(api), kubeconfig
    await api.close()
    await server.stop()


def hub_args(server: natsd.NatsServer, conf: Path, keys_dir: Path, kubeconfig: Path) -> list[str]:
    return [
        "--kubeconfig", str(kubeconfig), "--nats-url", server.url,
        *helpers.identity_flag(helpers.identity_file(conf, "hub")),
        "--signing-key", str(keys_dir / keyfiles.SIGNING_FILE),
        "--sealing-keys", str(keys_dir / keyfiles.SEALING_DIR),
        "--all-namespaces", "--sites", "site-a", "--leader-elect", "--lease-namespace", "default",
        "--lease-duration", "2",
    ]  # fmt: skip


async def test_two_replicas_one_leader_and_a_takeover_publishes_nothing_twice(
    secured_nats: tuple[natsd.NatsServer, Path], mgmt: tuple[kubeapi.Server, ckube.Kube, Path], tmp_path: Path
) -> None:
    server, conf = secured_nats
    _, kube, kubeconfig = mgmt
    keyfiles.generate(tmp_path / "keys")
    args = hub_args(server, conf, tmp_path / "keys", kubeconfig)
    hubs = {name: hub_process(args, tmp_path / f"{name}.log", name) for name in ("hub-1", "hub-2")}
    reader = await bus.connect(
        helpers.options(server.url, seed_file=helpers.identity_file(conf, "hub")), deadline=10
    )
    try:
        holder: list[str] = []

        async def leader_elected() -> bool:
            lease = await kube.get_or_none(resources.LEASE, "kamaji-broker-hub", namespace="default")
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
        await helpers.eventually(lambda: _holder_is(kube, other), within=30)
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
        lease = await kube.get(resources.LEASE, "kamaji-broker-hub", namespace="default")
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


async def _holder_is(kube: ckube.Kube, name: str) -> bool:
    lease = await kube.get_or_none(resources.LEASE, "kamaji-broker-hub", namespace="default")
    return bool(((lease or {}).get("spec") or {}).get("holderIdentity") == name)
