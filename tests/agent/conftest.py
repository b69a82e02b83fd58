"""The site under test: an emulated cluster with the Kamaji simulator, a real nats-server with
the topology the hub would create, hub keys, and the test playing the hub with the protocol."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
import nacl.public
import nacl.signing
import pytest

from common import bus
from common import kube as ckube
from common.bus import topology
from common.kube import resources
from protocol import keys, messages, signing, streams, subjects
from sandbox import kamaji
from tests import helpers

SITE = "site-a"
NAMESPACE = "tenants"


@dataclass
class Hub:
    """The test's stand-in for the hub: signs and publishes intents, reads what the site sent."""

    conn: bus.Connection
    prefix: str
    signer: nacl.signing.SigningKey
    sealer: nacl.public.PrivateKey
    public: keys.HubPublicKeys
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    async def send(self, intent: messages.Intent, *, signer: nacl.signing.SigningKey | None = None) -> int:
        signed = signing.sign(intent, signer or self.signer)
        subject = subjects.intent(intent.site, intent.namespace, intent.name, prefix=self.prefix)
        ack = await bus.publish(self.conn, subject, messages.encode(signed), msg_id=f"test-{next(self._ids)}")
        return ack.seq

    async def send_raw(self, subject_name: str, data: bytes) -> int:
        subject = subjects.intent(SITE, NAMESPACE, subject_name, prefix=self.prefix)
        return (await bus.publish(self.conn, subject, data, msg_id=f"raw-{next(self._ids)}")).seq

    async def status(self, name: str, *, namespace: str = NAMESPACE) -> messages.Status | None:
        stream = streams.stream_name(subjects.Kind.STATUS, site=SITE, prefix=self.prefix)
        stored = await bus.last_message(
            self.conn, stream, subjects.status(SITE, namespace, name, prefix=self.prefix)
        )
        return messages.decode_status(stored.data) if stored else None

    async def status_is(self, name: str, phase: str, reason: str | None = None) -> messages.Status:
        found: list[messages.Status] = []

        async def check() -> bool:
            s = await self.status(name)
            if s is not None and s.phase == phase and (reason is None or s.reason == reason):
                found.append(s)
                return True
            return False

        await helpers.eventually(check, within=15)
        return found[0]


def intent(name: str = "cp1", **kw: Any) -> messages.Intent:
    spec = kw.pop(
        "spec",
        {
            "controlPlane": {"deployment": {"replicas": 2}, "service": {"serviceType": "LoadBalancer"}},
            "kubernetes": {"version": "v1.31.0", "kubelet": {"cgroupfs": "systemd"}},
        },
    )
    return helpers.intent(
        site=kw.pop("site", SITE), namespace=kw.pop("namespace", NAMESPACE), name=name, spec=spec, **kw
    )


def with_version(
    i: messages.Intent, version: str, *, replicas: int = 2, generation: int = 2
) -> messages.Intent:
    spec = msgspec.json.decode(msgspec.json.encode(i.spec))
    spec["kubernetes"]["version"] = version
    spec["controlPlane"]["deployment"]["replicas"] = replicas
    return msgspec.structs.replace(i, spec=spec, generation=generation)


@pytest.fixture
def hub_keys() -> tuple[nacl.signing.SigningKey, nacl.public.PrivateKey, keys.HubPublicKeys]:
    signer, sealer = keys.new_signing_key(), keys.new_sealing_key()
    public = keys.HubPublicKeys(
        signing=(keys.public_entry(bytes(signer.verify_key), created_at=helpers.T0),),
        sealing=(keys.public_entry(bytes(sealer.public_key), created_at=helpers.T0),),
    )
    return signer, sealer, public


@pytest.fixture
async def hub(
    conn: bus.Connection,
    prefix: str,
    hub_keys: tuple[nacl.signing.SigningKey, nacl.public.PrivateKey, keys.HubPublicKeys],
) -> Hub:
    await bus.ensure_topology(conn, sites=[SITE], prefix=prefix)
    # The hub owns consumer settings; a short ack wait makes redelivery tests quick.
    short = msgspec.structs.replace(streams.agent_consumer(SITE, prefix=prefix), ack_wait=2.0)
    await topology.ensure_consumer(conn, short)
    signer, sealer, public = hub_keys
    return Hub(conn=conn, prefix=prefix, signer=signer, sealer=sealer, public=public)


@pytest.fixture
async def site(kube: ckube.Kube) -> AsyncIterator[ckube.Kube]:
    """The site cluster: namespace ``tenants`` and a Kamaji simulator (fast delays)."""
    await kube.create(resources.NAMESPACE, {"metadata": {"name": NAMESPACE}})
    sim = kamaji.Simulator(kube.api_client, ready_delay=0.2, delete_delay=0.3)
    await sim.start()
    yield kube
    await sim.stop()
