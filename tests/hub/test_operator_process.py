"""`kamaji-broker hub --nats-operator-dir` as a real process on a nats-server in operator mode:
it mints its own user, answers a site's bootstrap, and deleting the Site revokes the site's
agent at once, with every RKCP of the site saying so in ``SiteConnected``. On an emulated
management cluster and on a real one, as the ServiceAccount deploy/hub makes (``mgmt``)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from common import bus
from common import kube as ckube
from common.files import keys, natsserver
from common.files import operator as natsoperator
from common.kube import resources
from hub.controllers.site import credentials as sitecredentials
from hub.credentials import operator as operatormode
from protocol import credentials, natsjwt, permissions
from sandbox import natsd
from tests import conftest, helpers
from tests.hub.conftest import RKCP, SITE, cluster_obj, rkcp_obj
from tests.hub.test_process import Mgmt, hub_process
from tests.hub.test_process import mgmt as mgmt  # the fixture
from tests.security import nats_support as ns


@pytest.fixture
async def operator(tmp_path: Path) -> AsyncIterator[tuple[natsd.NatsServer, Path]]:
    server, conf = conftest.operator_mode_server(tmp_path / "nats")
    server.start()
    yield server, conf
    server.stop()


def _args(server: natsd.NatsServer, conf: Path, keys_dir: Path, mgmt: Mgmt) -> list[str]:
    """The hub's flags; its bootstrap credentials in its own namespace, the only one where its
    Role lets it delete a Secret (on a real cluster)."""
    return [
        "--kubeconfig", str(mgmt.hub_kubeconfig), "--nats-url", server.url,
        "--nats-ca-file", str(helpers.nats_tls().ca),
        "--nats-operator-dir", str(conf / natsoperator.HUB_DIR),
        "--signing-key", str(keys_dir / keys.SIGNING_FILE),
        "--sealing-keys", str(keys_dir / keys.SEALING_DIR),
        "--all-namespaces", "--heartbeat-interval", "1", "--bootstrap-namespace", mgmt.lease_namespace,
    ]  # fmt: skip


async def _condition(kube: ckube.Kube, name: str, kind: str) -> tuple[str, str, str]:
    obj: dict[str, Any] = await kube.get(RKCP, name, namespace="default")
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == kind:
            return cond["status"], cond["reason"], cond.get("message", "")
    return "", "", ""


async def test_bootstrap_then_deleting_the_site_revokes_its_agent(
    operator: tuple[natsd.NatsServer, Path], mgmt: Mgmt, tmp_path: Path
) -> None:
    server, conf = operator
    kube = mgmt.kube
    keys.generate(tmp_path / "keys")
    hub = hub_process(_args(server, conf, tmp_path / "keys", mgmt), tmp_path / "hub.log", "hub-1")
    try:
        await helpers.eventually(
            lambda: _finalized(kube), within=30, what="the Site holds the hub's finalizer"
        )
        cl = await kube.create(resources.CLUSTER, cluster_obj("c1"), namespace="default")
        await kube.create(RKCP, rkcp_obj("cp1", cluster=cl), namespace="default")
        # the hub wrote the new Site's bootstrap credential; the operator hands it to the agent
        boot = await _handed_over(mgmt, tmp_path / "boot.creds")
        asker = await ns.connect(server, boot, inbox_prefix=permissions.bootstrap_inbox_prefix(SITE))
        seed = natsjwt.new_seed("user")
        req = credentials.request(credentials.Kind.BOOTSTRAP, SITE, seed, credential=helpers.creds_jwt(boot))
        reply = msgspec.json.decode(
            (await asker.ask(f"kb.bootstrap.{SITE}", msgspec.json.encode(req))).data, type=credentials.Reply
        )
        assert reply.jwt, reply.error
        agent_creds = tmp_path / "agent.creds"
        agent_creds.write_text(natsjwt.creds(reply.jwt, seed))
        agent = await ns.connect(server, agent_creds, inbox_prefix=bus.site_inbox_prefix(SITE))
        site = await kube.get(resources.SITE, SITE)
        assert site["status"]["credential"]["publicKey"] == natsjwt.public_of(seed)
        # used: the bootstrap Secret is deleted and its credential revoked at once (the hub
        # revokes a used bootstrap itself only after a grace, for an agent whose answer was lost)
        await helpers.eventually(
            lambda: _no_secret(mgmt, f"{SITE}-nats-bootstrap"),
            within=30,
            what="the used bootstrap Secret deleted",
        )
        with pytest.raises(Exception, match=r"(?i)authorization violation"):
            await ns.connect(server, boot, inbox_prefix=permissions.bootstrap_inbox_prefix(SITE))

        await kube.delete(resources.SITE, SITE)
        await helpers.eventually(lambda: not agent.nc.is_connected, within=30, what="the agent thrown out")
        await helpers.eventually(lambda: _gone(kube), within=30, what="the Site released and gone")
        status, _reason, message = await helpers.eventually(
            lambda: _condition(kube, "cp1", "SiteConnected"),
            lambda c: c[1] == "CredentialsRevoked",
            within=30,
        )
        assert status == "False" and "revoked its agent's NATS credential" in message
        with pytest.raises(Exception, match=r"(?i)authorization violation"):
            await ns.connect(server, agent_creds, inbox_prefix=bus.site_inbox_prefix(SITE))
    finally:
        assert await asyncio.to_thread(hub.stop) == 0


async def _finalized(kube: ckube.Kube) -> bool:
    site = await kube.get(resources.SITE, SITE)
    return sitecredentials.FINALIZER in (site["metadata"].get("finalizers") or [])


async def _handed_over(mgmt: Mgmt, path: Path) -> Path:
    """The bootstrap credential the hub wrote for the new Site, as the operator hands it over."""
    secret = await helpers.eventually(
        lambda: mgmt.kube.get_or_none(
            resources.SECRET, f"{SITE}-nats-bootstrap", namespace=mgmt.lease_namespace
        ),
        within=30,
        what="the bootstrap Secret",
    )
    await asyncio.to_thread(path.write_bytes, base64.b64decode(secret["data"]["bootstrap.creds"]))
    return path


async def _no_secret(mgmt: Mgmt, name: str) -> bool:
    return await mgmt.kube.get_or_none(resources.SECRET, name, namespace=mgmt.lease_namespace) is None


async def test_a_site_deleted_before_its_agent_came_takes_its_bootstrap_credential_along(
    operator: tuple[natsd.NatsServer, Path], mgmt: Mgmt, tmp_path: Path
) -> None:
    server, conf = operator
    kube = mgmt.kube
    keys.generate(tmp_path / "keys")
    hub = hub_process(_args(server, conf, tmp_path / "keys", mgmt), tmp_path / "hub.log", "hub-1")
    try:
        boot = await _handed_over(mgmt, tmp_path / "boot.creds")
        waiting = await ns.connect(server, boot, inbox_prefix=permissions.bootstrap_inbox_prefix(SITE))
        await kube.delete(resources.SITE, SITE)
        await helpers.eventually(lambda: not waiting.nc.is_connected, within=30, what="the bootstrap revoked")
        await helpers.eventually(lambda: _no_secret(mgmt, f"{SITE}-nats-bootstrap"), within=30)
        await helpers.eventually(lambda: _gone(kube), within=30, what="the Site released and gone")
    finally:
        assert await asyncio.to_thread(hub.stop) == 0


async def _gone(kube: ckube.Kube) -> bool:
    return await kube.get_or_none(resources.SITE, SITE) is None


def test_the_operator_dir_is_checked_file_by_file(tmp_path: Path) -> None:
    natsserver.nats_config(tmp_path / "a", auth="operator")
    natsserver.nats_config(tmp_path / "b", auth="operator")
    good = tmp_path / "a" / natsoperator.HUB_DIR
    assert (
        operatormode.load(good).authority.account
        == natsoperator.Keys.load_or_create(tmp_path / "a").account_public
    )
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for name in operatormode.FILES:
        source = tmp_path / ("b" if name == "account-signing.nk" else "a") / natsoperator.HUB_DIR / name
        (mixed / name).write_bytes(source.read_bytes())
        (mixed / name).chmod(0o600)
    with pytest.raises(ValueError, match=r"account-signing\.nk is not a signing key of the account"):
        operatormode.load(mixed)
    (mixed / "system.creds").unlink()
    with pytest.raises(ValueError, match=r"system\.creds is missing"):
        operatormode.load(mixed)
