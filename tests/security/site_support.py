"""A site and a hub as the attack tests need them: the real loops, in this process, on the
nats-server that `nats-config` and `site add` configured (``secured_nats``), with the generated
identities: the hub connects with ``hub.nk``, the agent with ``sites/site-a.nk`` and its own
inbox prefix, and the attacker with whichever it has stolen.

``World`` owns two emulated clusters (management and site-a, the latter with the Kamaji
simulator), the hub's keys, and the tasks of the loops it started; ``alive`` says whether every
one of them still runs (a loop that died of an attack is a finding).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nacl.signing
import nats
import yaml
from nats.aio.client import Client

from agent import metrics as agent_metrics
from agent.apply import loop as apply_loop
from agent.status import loop as status_loop
from common import bus
from common import kube as ckube
from common.kube import resources
from hub import metrics as hub_metrics
from hub.api import crds as crdgen
from hub.controllers import deps as config
from hub.controllers.rkcp import controller as rkcp_controller
from protocol import keys, messages, sealing, streams, subjects
from sandbox import kamaji, kubeapi, natsd
from tests import helpers
from tests.agent import wiring
from tests.hub import conftest as hub_conftest
from tests.hub import loops as hub_loops

ROOT = Path(__file__).resolve().parents[2]
SITE = "site-a"
NAMESPACE = "tenants"
"""The target namespace at the site, and the RKCPs' own namespace in the management cluster:
an RKCP that places its control plane into the namespace of its own name needs no grant."""
PREFIX = subjects.DEFAULT_PREFIX
"""The prefix `nats-config` wrote the permissions for."""
RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
TCP = resources.TENANT_CONTROL_PLANE


def intent_stream() -> str:
    return streams.stream_name(subjects.Kind.INTENT, prefix=PREFIX)


def intent_subject(name: str, *, namespace: str = NAMESPACE, site: str = SITE) -> str:
    return subjects.intent(site, namespace, name, prefix=PREFIX)


async def hub_connection(server: natsd.NatsServer, conf: Path) -> bus.Connection:
    return await bus.connect(
        helpers.options(server.url, seed_file=helpers.identity_file(conf, "hub")), deadline=10
    )


async def site_connection(server: natsd.NatsServer, conf: Path, site: str = SITE) -> bus.Connection:
    options = helpers.options(
        server.url,
        seed_file=helpers.identity_file(conf, f"sites/{site}"),
        inbox_prefix=bus.site_inbox_prefix(site),
    )
    return await bus.connect(options, deadline=10)


@dataclass
class World:
    hub_conn: bus.Connection
    site_conn: bus.Connection
    mgmt: ckube.Kube
    site: ckube.Kube
    signer: nacl.signing.SigningKey
    keyring: sealing.Keyring
    public: keys.HubPublicKeys
    tasks: dict[str, list[asyncio.Task[None]]] = field(default_factory=dict)
    controller: rkcp_controller.Controller | None = None
    hub_metrics: hub_metrics.Metrics = field(default_factory=hub_metrics.Metrics)
    agent_metrics: agent_metrics.Metrics = field(default_factory=agent_metrics.Metrics)

    def start_hub(self, *, intent_check_interval: float = 30.0) -> rkcp_controller.Controller:
        settings = config.Settings(
            static_sites=frozenset({SITE}), prefix=PREFIX, workers=2, heartbeat_interval=0.3,
            intent_check_interval=intent_check_interval,
        )  # fmt: skip
        c, self.tasks["hub"] = hub_loops.start(
            settings, kube=self.mgmt, conn=self.hub_conn, signer=self.signer, keyring=self.keyring,
            metrics=self.hub_metrics,
        )  # fmt: skip
        self.controller = c
        return c

    def start_agent(self, *, namespaces: tuple[str, ...] = ()) -> apply_loop.ApplyLoop:
        m = self.agent_metrics
        deps = wiring.deps(self.site_conn, self.site, self.public, site=SITE, prefix=PREFIX, metrics=m)
        publisher = deps.publisher
        settings = wiring.settings(
            site=SITE, namespaces=namespaces, prefix=PREFIX, status_min_interval=0.1, namespace_retry=0.5
        )
        status = status_loop.StatusLoop(settings, deps)
        apply = apply_loop.ApplyLoop(
            settings, deps, on_delete=status.deleting, known=status.known, bind_retry=0.2
        )

        async def beat() -> None:
            while True:
                hb = messages.Heartbeat(site=SITE, started_at=helpers.T0, sent_at=messages.utcnow())
                await publisher.heartbeat(hb)
                await asyncio.sleep(0.3)

        self.tasks["agent"] = [
            asyncio.create_task(apply.run(), name="agent-apply"),
            asyncio.create_task(status.run(), name="agent-status"),
            asyncio.create_task(beat(), name="agent-heartbeat"),
        ]
        return apply

    def dead(self) -> list[str]:
        """The loops that are no longer running (each was meant to run until stopped)."""
        return [t.get_name() for ts in self.tasks.values() for t in ts if t.done()]

    async def stop(self, part: str) -> None:
        tasks = self.tasks.pop(part, [])
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def tcp(self, name: str) -> dict[str, Any] | None:
        return await self.site.get_or_none(TCP, name, namespace=NAMESPACE)

    async def status(self, name: str) -> messages.Status | None:
        stored = await bus.last_message(
            self.hub_conn,
            streams.stream_name(subjects.Kind.STATUS, site=SITE, prefix=PREFIX),
            subjects.status(SITE, NAMESPACE, name, prefix=PREFIX),
        )
        return messages.decode_status(stored.data) if stored else None

    async def stored_intent(self, name: str) -> bus.StoredMessage | None:
        return await bus.last_message(self.hub_conn, intent_stream(), intent_subject(name))

    def rejected(self, reason: str) -> float:
        value = self.agent_metrics.registry.get_sample_value(
            "kb_agent_intents_rejected_total", {"reason": reason}
        )
        return value or 0.0


def cluster_obj(name: str) -> dict[str, Any]:
    return hub_conftest.cluster_obj(name, namespace=NAMESPACE)


def rkcp_obj(name: str, cluster: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return hub_conftest.rkcp_obj(
        name, cluster=cluster, namespace=NAMESPACE, **{"targetNamespace": NAMESPACE, **spec}
    )


@contextlib.asynccontextmanager
async def world(server: natsd.NatsServer, conf: Path, tmp_path: Path) -> AsyncIterator[World]:
    """Everything but the loops, which the test starts; all of it stopped on the way out."""
    async with contextlib.AsyncExitStack() as stack:
        mgmt_server = kubeapi.Server(name="mgmt")
        site_server = kubeapi.Server(name=SITE)
        for s in (mgmt_server, site_server):
            await s.start(port=0)
            stack.push_async_callback(s.stop)
        crds = (ROOT / "deploy" / "crds" / f for f in (crdgen.FILENAME, crdgen.SITE_FILENAME))
        for path in (ROOT / "sandbox" / "crds" / "cluster.yaml", *crds):
            await mgmt_server.apply_crd(yaml.safe_load(path.read_text()))
        await site_server.apply_crd(
            yaml.safe_load((ROOT / "sandbox" / "crds" / "tenantcontrolplane.yaml").read_text())
        )
        mgmt_api = await ckube.api_client_from_kubeconfig(mgmt_server.write_kubeconfig(tmp_path / "mgmt"))
        stack.push_async_callback(mgmt_api.close)
        site_api = await ckube.api_client_from_kubeconfig(site_server.write_kubeconfig(tmp_path / "site"))
        stack.push_async_callback(site_api.close)
        mgmt, site = ckube.Kube(mgmt_api), ckube.Kube(site_api)
        await mgmt.create(resources.NAMESPACE, {"metadata": {"name": NAMESPACE}})
        # The site's Site object: its default rule places RKCPs of NAMESPACE into NAMESPACE.
        await mgmt.create(resources.SITE, hub_conftest.site_obj(SITE))
        await site.create(resources.NAMESPACE, {"metadata": {"name": NAMESPACE}})
        sim = kamaji.Simulator(site_api, ready_delay=0.2, delete_delay=0.3)
        await sim.start()
        stack.push_async_callback(sim.stop)
        hub_conn = await hub_connection(server, conf)
        stack.push_async_callback(hub_conn.close)
        site_conn = await site_connection(server, conf)
        stack.push_async_callback(site_conn.close)
        # The hub owns streams and consumers; agents cannot create them.
        await bus.ensure_topology(hub_conn, sites=[SITE], prefix=PREFIX)
        signer, sealer = keys.new_signing_key(), keys.new_sealing_key()
        public = keys.HubPublicKeys(
            signing=(keys.public_entry(bytes(signer.verify_key), created_at=helpers.T0),),
            sealing=(keys.public_entry(bytes(sealer.public_key), created_at=helpers.T0),),
        )
        w = World(
            hub_conn=hub_conn, site_conn=site_conn, mgmt=mgmt, site=site, signer=signer,
            keyring=sealing.Keyring([sealer]), public=public,
        )  # fmt: skip
        try:
            yield w
        finally:
            for part in list(w.tasks):
                await w.stop(part)


@contextlib.asynccontextmanager
async def wiretap(server: natsd.NatsServer, conf: Path) -> AsyncIterator[Client]:
    """A raw client of the test's wiretap identity (``tests.conftest.wiretap_user``): it sees
    every message published, the strongest eavesdropper an attack can be measured against."""
    async with _raw_client(server, conf, "wiretap") as nc:
        yield nc


@contextlib.asynccontextmanager
async def stolen_hub_identity(server: natsd.NatsServer, conf: Path) -> AsyncIterator[Client]:
    """A raw nats-py client with the hub's NATS identity (an attacker who stole its seed)."""
    async with _raw_client(server, conf, "hub") as nc:
        yield nc


@contextlib.asynccontextmanager
async def _raw_client(server: natsd.NatsServer, conf: Path, identity: str) -> AsyncIterator[Client]:
    nc = await nats.connect(
        servers=[server.url],
        **helpers.tls_options(server.url),
        **helpers.credential_option(helpers.identity_file(conf, identity)),
        allow_reconnect=False,
        # The server sends INFO only after its TLS-first wait (natsconfig.TLS_FIRST_FALLBACK,
        # 2 s) to a client that waits for it: nats-py's default 2 s would race that.
        connect_timeout=5,
    )
    try:
        yield nc
    finally:
        await nc.close()
