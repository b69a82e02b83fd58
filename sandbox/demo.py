"""``kamaji-broker sandbox`` until the full sandbox lands: the wire protocol, end to end, for real.

Generates hub keys and site credentials with the same code as ``keys`` / ``nats-config`` /
``site add``, starts nats-server from the wheel on 127.0.0.1, and walks one control plane
through the broker's path: the hub creates the topology and publishes a signed intent; site-a's
agent identity fetches it, verifies it and seals secrets back; the hub opens them; site-a is
refused site-b's intents. Every step prints one line; the exit code says whether all held.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import shutil
import sys
from pathlib import Path

from common import bus, errors, keyfiles, natsfiles
from protocol import keys, messages, sealing, signing, streams, subjects
from sandbox import natsd

SITES = ("site-a", "site-b")


def _say(step: str) -> None:
    print(f"  ✔ {step}" if sys.stdout.encoding.lower().startswith("utf") else f"  ok {step}", flush=True)


async def _walk(server: natsd.NatsServer, conf: Path, key_dir: Path) -> None:
    now = dt.datetime.now(dt.UTC)
    hub = await bus.connect(bus.Options(servers=(server.url,), seed_file=conf / "hub.nk"), deadline=10)
    site_opts = bus.Options(
        servers=(server.url,),
        seed_file=conf / "sites" / "site-a.nk",
        inbox_prefix=bus.site_inbox_prefix("site-a"),
    )
    agent = await bus.connect(site_opts, deadline=10)
    try:
        await bus.ensure_topology(hub, sites=SITES)
        _say("hub created streams KB_INTENTS, KB_STATUS, KB_SECRETS, KB_SITES and consumers agent-site-a/b")

        signer = keys.load_signing_key((key_dir / keyfiles.SIGNING_FILE).read_text())
        intent = messages.Intent(
            op="provision",
            site="site-a",
            namespace="default",
            name="demo",
            owner=messages.Owner(uid="demo-uid", namespace="default", name="demo", cluster="demo"),
            generation=1,
            issued_at=now,
            spec={"kubernetes": {"version": "v1.31.0"}, "controlPlane": {"deployment": {"replicas": 2}}},
        )
        subject = subjects.intent("site-a", "default", "demo")
        ack = await bus.publish(
            hub,
            subject,
            messages.encode(signing.sign(intent, signer)),
            msg_id="demo-1",
            expected_last_subject_seq=0,
        )
        _say(f"hub published a signed provision intent on {subject} (stream seq {ack.seq})")

        public = keys.decode_public_keys((key_dir / keyfiles.PUBLIC_FILE).read_bytes())
        consumer = await bus.bind(agent, streams.agent_consumer("site-a"))
        [delivery] = await consumer.fetch(1, timeout=5)
        received = signing.verify(delivery.data, public.verify_keys())
        await delivery.ack()
        _say(f"site-a fetched it, verified key {received.key_id} and acknowledged it")

        plaintext = b'{"admin.conf": "apiVersion: v1\\nkind: Config\\n"}'
        recipient = public.newest_sealing()
        box = messages.SealedSecrets(
            site="site-a",
            namespace="default",
            name="demo",
            owner_uid=received.owner.uid,
            recipient_key_id=recipient.key_id,
            ciphertext=sealing.seal(plaintext, recipient),
            checksum=sealing.checksum(plaintext),
            observed_at=now,
        )
        secret_subject = subjects.secret("site-a", "default", "demo")
        await bus.publish(agent, secret_subject, messages.encode(box), msg_id=f"demo-{box.checksum}")
        stored = await bus.last_message(hub, streams.stream_name(subjects.Kind.SECRET), secret_subject)
        if stored is None:
            raise RuntimeError(f"no sealed secrets stored on {secret_subject}")
        sealed = messages.decode_sealed_secrets(stored.data)
        ring = sealing.Keyring(
            keys.load_sealing_key(p.read_text()) for p in (key_dir / keyfiles.SEALING_DIR).glob("*.key")
        )
        opened = ring.open(sealed.ciphertext, key_id=sealed.recipient_key_id)
        if sealing.checksum(opened) != sealed.checksum:
            raise RuntimeError("sealed secrets opened to different bytes")
        _say(f"site-a sealed the secrets to hub key {recipient.key_id}; only the hub opened them")

        try:
            await bus.bind(agent, streams.agent_consumer("site-b"))
        except errors.PermissionDenied as exc:
            _say(f"site-a was refused site-b's intents: {exc.operation} to {exc.subject}")
        else:
            raise RuntimeError("site-a could read site-b's consumer")
        await consumer.unsubscribe()
    finally:
        await agent.close()
        await hub.close()


def run(directory: Path) -> int:
    print("kamaji-broker sandbox: the hub, agent and emulated clusters arrive with later issues;")
    print("this run shows the wire protocol on a real nats-server with generated credentials.")
    if directory.exists():
        shutil.rmtree(directory)
    key_dir, conf = directory / "keys", directory / "nats"
    keyfiles.generate(key_dir)
    port = natsd.free_port()
    main, _ = natsfiles.nats_config(conf, host="127.0.0.1", port=port, store_dir=directory / "jetstream")
    for site in SITES:
        natsfiles.site_add(conf, site)
    _say(f"generated hub keys in {key_dir} and NATS credentials for {', '.join(SITES)} in {conf}")
    server = natsd.NatsServer(
        store_dir=directory / "jetstream", port=port, config=main, log_file=directory / "nats.log"
    )
    server.start()
    _say(f"nats-server {server.url} (pid {server.process.pid if server.process else '?'})")
    try:
        asyncio.run(_walk(server, conf, key_dir))
    finally:
        server.stop()
    _say("nats-server stopped")
    return 0
