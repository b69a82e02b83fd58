"""Support of tests/security/test_keys.py: a hub key directory rotated and retired with the real
CLI (the attacker keeps the old private keys), the agent's apply loop wired from the public keys
file as ``agent.main`` wires it, and the hub's ingest with the keyring ``hub.main`` loads."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import nacl.public
import nacl.signing

from agent import metrics as agent_metrics
from agent.apply import loop
from common import bus, health
from common import kube as ckube
from common.files import keys as keyfiles
from hub import metrics as hub_metrics
from hub.ingest import consumer, observations, record
from kamaji_broker import cli
from protocol import keys, messages, sealing
from tests.agent import wiring

SITE = "site-a"
NAMESPACE = "tenants"


@dataclass(frozen=True)
class Compromised:
    """A key directory after `keys generate`, a rotation of both keys, and `keys retire` of the
    old ones; the old private keys are what an attacker who stole them holds."""

    out: Path
    old_signer: nacl.signing.SigningKey
    old_sealer: nacl.public.PrivateKey
    old_sealing_text: str
    """The old sealing key file's content (as a backup or an unpruned Secret still has it)."""
    signer: nacl.signing.SigningKey
    sealer: nacl.public.PrivateKey

    @property
    def public_file(self) -> Path:
        return self.out / keyfiles.PUBLIC_FILE

    @property
    def old_signing_id(self) -> str:
        return keys.key_id(bytes(self.old_signer.verify_key))

    @property
    def old_sealing_id(self) -> str:
        return keys.key_id(bytes(self.old_sealer.public_key))

    def old_sealing_public(self) -> keys.PublicKey:
        return keys.public_entry(bytes(self.old_sealer.public_key), created_at=messages.utcnow())

    def sealing_public(self) -> keys.PublicKey:
        return keys.public_entry(bytes(self.sealer.public_key), created_at=messages.utcnow())


def rotate_and_retire(out: Path, *, retire: bool = True) -> Compromised:
    assert cli.main(["keys", "generate", "--out", str(out)]) == 0
    old_signer = keyfiles.read_signing_key(out / keyfiles.SIGNING_FILE)
    [old_file] = (out / keyfiles.SEALING_DIR).glob("*.key")
    old_text = old_file.read_text()
    assert cli.main(["keys", "generate", "--out", str(out), "--rotate-signing", "--rotate-sealing"]) == 0
    current = keys.decode_public_keys((out / keyfiles.PUBLIC_FILE).read_bytes()).newest_sealing()
    if retire:
        for kid in (keys.key_id(bytes(old_signer.verify_key)), old_file.stem):
            assert cli.main(["keys", "retire", kid, "--out", str(out)]) == 0
    sealers = keyfiles.read_sealing_keys(out / keyfiles.SEALING_DIR)
    return Compromised(
        out=out,
        old_signer=old_signer,
        old_sealer=keys.load_sealing_key(old_text),
        old_sealing_text=old_text,
        signer=keyfiles.read_signing_key(out / keyfiles.SIGNING_FILE),
        sealer=sealers[current.key_id],
    )


@dataclass
class Agent:
    """The apply loop of a site agent, trusting what ``public_file`` says (as agent.main does)."""

    loop: loop.ApplyLoop
    metrics: agent_metrics.Metrics
    readiness: health.Readiness
    task: asyncio.Task[None] | None = field(default=None)

    def count(self, result: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "kb_agent_intents_total", {"op": "unknown", "result": result}
        )
        return value or 0.0

    @property
    def alive(self) -> bool:
        return self.task is not None and not self.task.done()


@contextlib.asynccontextmanager
async def running_agent(
    conn: bus.Connection, kube: ckube.Kube, *, public_file: Path, prefix: str
) -> AsyncIterator[Agent]:
    hub_keys = keyfiles.load_public_keys(public_file)
    deps = wiring.deps(conn, kube, hub_keys, site=SITE, prefix=prefix)
    metrics, readiness = deps.metrics, deps.readiness
    settings = wiring.settings(site=SITE, namespaces=(NAMESPACE,), prefix=prefix, namespace_retry=0.5)
    # Only forged intents are sent here, never applied: nothing is deleted, no Deleted is owed,
    # and no status loop runs (whether a TCP is known cannot be said: each one is read first).
    apply = loop.ApplyLoop(
        settings,
        deps,
        on_delete=lambda namespace, name, seq: None,
        known=lambda namespace, name: None,
        bind_retry=0.2,
    )
    agent = Agent(apply, metrics, readiness)
    agent.task = asyncio.create_task(apply.run())
    try:
        yield agent
    finally:
        agent.task.cancel()
        await asyncio.gather(agent.task, return_exceptions=True)


@dataclass
class HubIngest:
    ingest: consumer.Ingest
    obs: observations.Observations
    metrics: hub_metrics.Metrics
    task: asyncio.Task[None]

    def rejected(self, stream: str, reason: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "kb_hub_bus_rejected_total", {"stream": stream, "reason": reason}
        )
        return value or 0.0


@contextlib.asynccontextmanager
async def running_ingest(conn: bus.Connection, *, sealing_dir: Path, prefix: str) -> AsyncIterator[HubIngest]:
    """The hub's ingest of site-a's stream, as if an RKCP mapped every control plane there (the
    hub opens boxes only for coordinates an RKCP maps to)."""
    obs, metrics = observations.Observations(), hub_metrics.Metrics()
    reader = record.Intake(
        record.Deps(conn=conn, observations=obs, keyring=keyfiles.keyring(sealing_dir), metrics=metrics),
        prefix=prefix,
    )
    ing = consumer.Ingest(
        consumer.Deps(
            intake=reader,
            sites=lambda: frozenset({"site-a"}),
            maps=lambda coords: True,
            on_change=lambda coords: None,
            ensured=lambda site: True,
        ),
        consumer.Settings(rescan_interval=0.2, retain_interval=0.2),
    )
    task = asyncio.create_task(ing.run())
    try:
        yield HubIngest(ing, obs, metrics, task)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def sealed_to(recipient: keys.PublicKey, payload: messages.SecretsPayload) -> messages.SealedSecrets:
    plaintext = messages.encode(payload)
    return messages.SealedSecrets(
        site=SITE,
        namespace=NAMESPACE,
        name="cp1",
        owner_uid="8d1c-uid",
        recipient_key_id=recipient.key_id,
        ciphertext=sealing.seal(plaintext, recipient),
        checksum=sealing.checksum(plaintext),
        observed_at=messages.utcnow(),
    )
