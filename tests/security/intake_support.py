"""A real hub process between a secured nats-server and an emulated management cluster, and the
sites' side of the wire: what tests/security/test_hub_intake.py and test_exhaustion.py attack.

``Stand`` holds: nats-server configured by ``nats-config`` (sites site-a and site-b added by
``site add``), the management-cluster emulator with one RKCP per site (``a-1`` at site-a, ``b-1``
at site-b, each in namespace ``tenants`` targeting its own namespace), ``kamaji-broker hub`` as a
child process with the given flags, a connection with the hub's identity (to read streams) and
one per site with that site's own credentials (the attacker is site-a). Sealed boxes are made
with the hub's real public keys, as an agent would.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import nkeys
import yaml
from prometheus_client.parser import text_string_to_metric_families

from common import bus
from common import kube as ckube
from common.files import keys as keyfiles
from common.files import natsserver
from common.kube import resources
from hub.api import crds as crdgen
from protocol import keys, messages, sealing, streams, subjects
from sandbox import kubeapi, natsd, ports
from tests import helpers
from tests.hub import conftest as hub_conftest

ROOT = Path(__file__).resolve().parents[2]
RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
NS = "tenants"
SITES = ("site-a", "site-b")
MAPPED = {"site-a": "a-1", "site-b": "b-1"}
"""The control plane an RKCP maps to at each site: (site, tenants, <name>)."""

PAYLOAD = messages.SecretsPayload(
    kubeconfig="apiVersion: v1\nkind: Config\nusers: [{name: admin, user: {token: SECRET-TOKEN}}]\n",
    ca_crt="-----BEGIN CERTIFICATE-----\nCRT\n-----END CERTIFICATE-----\n",
    ca_key="-----BEGIN EC PRIVATE KEY-----\nTOP-SECRET-CA-KEY\n-----END EC PRIVATE KEY-----\n",
)


def rejected_key(reason: str, *, site: str = "site-a") -> tuple[str, str]:
    return (streams.site_stream_name(site), reason)


@dataclass
class Stand:
    nats: natsd.NatsServer
    conf: Path
    keys_dir: Path
    kube: ckube.Kube
    hub: helpers.CliProcess
    reader: bus.Connection
    sites: dict[str, bus.Connection]
    uids: dict[str, str]
    """RKCP uid per site (the owner uid a genuine agent reports)."""

    # -- the wire ---------------------------------------------------------------------------

    def hub_public(self) -> keys.PublicKey:
        public = keys.decode_public_keys((self.keys_dir / keyfiles.PUBLIC_FILE).read_bytes())
        return public.newest_sealing()

    def sealed(
        self,
        *,
        site: str = "site-a",
        name: str | None = None,
        recipient: keys.PublicKey | None = None,
        plaintext: bytes | None = None,
        padding: int = 0,
        **override: Any,
    ) -> messages.SealedSecrets:
        """A box as the agent makes it, to the hub's key; ``padding`` bytes grow the plaintext."""
        payload = PAYLOAD
        if padding:
            payload = messages.SecretsPayload(
                kubeconfig=PAYLOAD.kubeconfig + "#" * padding, ca_crt=PAYLOAD.ca_crt, ca_key=PAYLOAD.ca_key
            )
        encoded = messages.encode(payload) if plaintext is None else plaintext
        to = recipient or self.hub_public()
        fields: dict[str, Any] = {
            "site": site,
            "namespace": NS,
            "name": name or MAPPED[site],
            "owner_uid": self.uids.get(site, ""),
            "recipient_key_id": to.key_id,
            "ciphertext": sealing.seal(encoded, to),
            "checksum": sealing.checksum(encoded),
            "observed_at": helpers.T0,
        }
        fields.update(override)
        return messages.SealedSecrets(**fields)

    def status(self, *, site: str = "site-a", name: str | None = None, **override: Any) -> messages.Status:
        fields: dict[str, Any] = {
            "site": site,
            "namespace": NS,
            "name": name or MAPPED[site],
            "owner_uid": self.uids.get(site, ""),
            "observed_generation": 1,
            "intent_seq": 0,
            "phase": "Ready",
            "version": "v1.31.0",
            "endpoint": messages.Endpoint(host="10.0.0.1", port=6443),
            "replicas": 2,
            "ready_replicas": 2,
            "observed_at": dt.datetime.now(dt.UTC),
        }
        fields.update(override)
        return messages.Status(**fields)

    async def publish(self, site: str, subject: str, data: bytes) -> bus.Ack:
        """Publish with ``site``'s own credentials (raises QuotaExceeded when refused)."""
        return await bus.publish(self.sites[site], subject, data, msg_id=uuid.uuid4().hex, attempts=1)

    async def raw_publish(self, site: str, subject: str, data: bytes) -> bytes:
        """Publish by speaking the NATS protocol directly, as an attacker's own client would,
        without nats-py's client-side max_payload check; returns the server's first answer."""
        identity = helpers.identity_file(self.conf, f"sites/{site}")
        kp = nkeys.from_seed(bytearray(helpers.seed_of(identity).encode()))
        # TLS first, as every client of this server (nats-config's handshake_first).
        tls = helpers.tls_context(self.nats.url)
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", self.nats.port, ssl=tls, server_hostname="127.0.0.1" if tls else None
        )
        try:
            info = json.loads((await reader.readline()).removeprefix(b"INFO ").decode())
            connect = {
                "verbose": False,
                "pedantic": False,
                "protocol": 1,
                "headers": True,
                "sig": base64.b64encode(kp.sign(info["nonce"].encode())).decode(),
            }
            if identity.suffix == ".creds":  # operator mode: the user JWT, and the proof of its key
                connect["jwt"] = helpers.creds_jwt(identity)
            else:
                connect["nkey"] = kp.public_key.decode()
            writer.write(f"CONNECT {json.dumps(connect)}\r\nPING\r\n".encode())
            await writer.drain()
            pong = await reader.readline()
            if pong != b"PONG\r\n":
                raise AssertionError(f"raw client not connected: {pong!r}")
            # The header announces the size; the server judges it before reading the payload.
            writer.write(f"PUB {subject} {len(data)}\r\n".encode())
            await writer.drain()
            answer = await _answer(reader)
            if answer.startswith(b"-ERR"):
                # The server closes a connection that broke its limit: nothing more comes.
                try:
                    closed = await reader.read() == b""
                except ConnectionError:
                    closed = True
                return answer + (b" (connection closed)" if closed else b"")
            writer.write(data + b"\r\nPING\r\n")
            await writer.drain()
            return await _answer(reader)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def last_seq(self, site: str) -> int:
        info = await bus.stream_info(self.reader, streams.site_stream_name(site))
        return info.last_seq

    async def stream_state(self, site: str) -> tuple[int, int]:
        """(messages, bytes) stored in ``site``'s stream."""
        info = await bus.stream_info(self.reader, streams.site_stream_name(site))
        return info.messages, info.bytes

    # -- the hub ----------------------------------------------------------------------------

    async def metrics(self) -> dict[tuple[str, str], float]:
        """``kb_hub_bus_rejected_total`` by (stream, reason), from the hub's /metrics."""
        _, text = await self.hub.get("/metrics")
        found: dict[tuple[str, str], float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "kb_hub_bus_rejected_total":
                    found[(sample.labels["stream"], sample.labels["reason"])] = sample.value
        return found

    async def backlog(self, site: str) -> float | None:
        """``kb_hub_site_backlog`` of ``site`` (None before the hub has read it)."""
        _, text = await self.hub.get("/metrics")
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "kb_hub_site_backlog" and sample.labels.get("site") == site:
                    return sample.value
        return None

    async def counter(self, name: str) -> float:
        _, text = await self.hub.get("/metrics")
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and not sample.labels:
                    return sample.value
        return 0.0

    async def alive(self) -> bool:
        if self.hub.p.poll() is not None:
            return False
        try:
            code, _ = await self.hub.get("/healthz")
        except aiohttp.ClientError:
            return False
        return code == 200

    def hub_rss(self) -> tuple[int, int]:
        """(current, peak) resident set size of the hub process in bytes (VmRSS, VmHWM)."""
        fields = {}
        for line in Path(f"/proc/{self.hub.p.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) * 1024
        return fields["VmRSS"], fields["VmHWM"]

    # -- the management cluster -------------------------------------------------------------

    async def rkcp(self, site: str) -> dict[str, Any]:
        return await self.kube.get(RKCP, MAPPED[site], namespace=NS)

    async def secrets(self) -> dict[str, str]:
        """Every Secret in the namespace, by name, with its resourceVersion."""
        found = await self.kube.list(resources.SECRET, namespace=NS)
        return {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in found.items}

    async def intent_seq(self, site: str) -> int:
        stored = await bus.last_message(
            self.reader, streams.intents_stream_name(), subjects.intent(site, NS, MAPPED[site])
        )
        return stored.seq if stored is not None else 0

    async def site_b_processed(self, marker: str) -> None:
        """site-b reports b-1 Ready with ``marker`` as its message; the hub shows it on b-1."""
        status = self.status(site="site-b", intent_seq=await self.intent_seq("site-b"), message=marker)
        await self.publish("site-b", subjects.status("site-b", NS, "b-1"), messages.encode(status))

        async def shown() -> bool:
            conditions = ((await self.rkcp("site-b")).get("status") or {}).get("conditions") or []
            return any(
                c.get("type") == "TenantControlPlaneReady" and c.get("message") == marker for c in conditions
            )

        await helpers.eventually(shown, within=30, every=0.2)


async def _answer(reader: asyncio.StreamReader) -> bytes:
    """The server's next answer that is not protocol chatter (INFO updates, PINGs)."""
    while True:
        line = await reader.readline()
        if not line.startswith((b"INFO ", b"PING")):
            return line


def cluster_obj(name: str) -> dict[str, Any]:
    return hub_conftest.cluster_obj(name, namespace=NS, clusterNetwork={"apiServerPort": 6443})


def rkcp_obj(name: str, site: str, cluster: dict[str, Any]) -> dict[str, Any]:
    return hub_conftest.rkcp_obj(name, cluster=cluster, namespace=NS, site=site, targetNamespace=NS)


CRD_FILES = (crdgen.FILENAME, crdgen.SITE_FILENAME)


@contextlib.asynccontextmanager
async def stand(work: Path, *, hub_flags: tuple[str, ...] = ()) -> AsyncIterator[Stand]:
    """Start everything; stop every process by its handle at the end."""
    conf = work / "conf"
    port = ports.free_port()
    main, _ = natsserver.nats_config(conf, host="127.0.0.1", port=port, store_dir=work / "store")
    for site in SITES:
        natsserver.site_add(conf, site)
    nats = natsd.NatsServer(store_dir=work / "store", port=port, config=main, log_file=work / "nats.log")
    nats.start()
    mgmt = kubeapi.Server(name="mgmt")
    await mgmt.start(port=0)
    connections: list[bus.Connection] = []
    hub: helpers.CliProcess | None = None
    api = None
    try:
        crds = (
            ROOT / "sandbox" / "crds" / "cluster.yaml",
            *(ROOT / "deploy" / "crds" / f for f in CRD_FILES),
        )
        for path in crds:
            await mgmt.apply_crd(yaml.safe_load(path.read_text()))
        kubeconfig = mgmt.write_kubeconfig(work / "mgmt.kubeconfig")
        api = await ckube.api_client_from_kubeconfig(kubeconfig)
        kube = ckube.Kube(api)
        for site in SITES:
            # Each site's Site object: its default rule places the RKCPs of namespace NS into
            # the site namespace of the same name.
            await kube.create(resources.SITE, hub_conftest.site_obj(site))
        keys_dir = work / "keys"
        keyfiles.generate(keys_dir)
        await kube.create(resources.NAMESPACE, {"metadata": {"name": NS}})
        uids = {}
        for site, name in MAPPED.items():
            cl = await kube.create(resources.CLUSTER, cluster_obj(name), namespace=NS)
            made = await kube.create(RKCP, rkcp_obj(name, site, cl), namespace=NS)
            uids[site] = made["metadata"]["uid"]
        args = [
            "--kubeconfig", str(kubeconfig), "--nats-url", nats.url,
            *helpers.identity_flag(helpers.identity_file(conf, "hub")),
            "--signing-key", str(keys_dir / keyfiles.SIGNING_FILE),
            "--sealing-keys", str(keys_dir / keyfiles.SEALING_DIR),
            "--all-namespaces", "--sites", ",".join(SITES),
            *hub_flags,
        ]  # fmt: skip
        hub = helpers.CliProcess("hub", args, log=work / "hub.log")
        await hub.readyz(lambda code, _: code == 200)
        reader = await bus.connect(
            helpers.options(nats.url, seed_file=helpers.identity_file(conf, "hub")), deadline=10
        )
        connections.append(reader)
        sites = {}
        for site in SITES:
            sites[site] = await bus.connect(
                helpers.options(
                    nats.url,
                    seed_file=helpers.identity_file(conf, f"sites/{site}"),
                    inbox_prefix=bus.site_inbox_prefix(site),
                ),
                deadline=10,
            )
            connections.append(sites[site])
        world = Stand(nats, conf, keys_dir, kube, hub, reader, sites, uids)
        for site in SITES:

            async def published(site: str = site) -> bool:
                return await world.intent_seq(site) > 0

            await helpers.eventually(published, within=30, every=0.2)

            async def settled(site: str = site) -> bool:
                # The site poller has read the backlog since the intent was published (one intent,
                # and no agent to take it) and the RKCP's status is written: nothing the hub
                # learns later changes it, so it stays still now.
                status = (await world.rkcp(site)).get("status") or {}
                return status.get("observedGeneration") is not None and await world.backlog(site) == 1

            await helpers.eventually(settled, within=30, every=0.2)
        yield world
    finally:
        for c in connections:
            await c.close()
        if hub is not None:
            # Blocking wait: the hub talks to the emulator served by this loop, so off the loop.
            await asyncio.to_thread(hub.stop)
        if api is not None:
            await api.close()
        await mgmt.stop()
        nats.stop()
