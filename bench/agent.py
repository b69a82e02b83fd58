"""Benchmark of one site agent: provisions/s applied and reported Ready, against raw NATS.

Runs every part as its own process, as in production: nats-server (from the wheel), the API
emulator (``python -m sandbox.kubeapi``), the Kamaji simulator with ready delay 0
(``python -m sandbox.kamaji``) and the agent (``kamaji-broker agent``). This process plays the
hub: it publishes K signed provision intents at once and reads the site's statuses from
KB_SITE_site-a until every TCP is Ready. In the same run it measures the raw JetStream pull+ack rate
(same fetch batch, same synchronous ack) on K plain messages, so the ratio shows what the
agent's work costs on top of the bus. Prints one JSON line per figure.

Run: ``.venv/bin/python bench/agent.py [--count 1000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import bus  # noqa: E402
from common import kube as ckube  # noqa: E402
from common.bus import topology  # noqa: E402
from common.files import keys as keyfiles  # noqa: E402
from common.files import natsserver  # noqa: E402
from common.files import tls as tlsfiles  # noqa: E402
from common.kube import resources  # noqa: E402
from protocol import keys, messages, signing, streams, subjects  # noqa: E402
from sandbox import natsd, ports  # noqa: E402

SITE, NAMESPACE = "site-a", "bench"


def emit(measurement: str, **fields: Any) -> None:
    print(json.dumps({"bench": "agent", "measurement": measurement, **fields}), flush=True)


def spawn(args: list[str], log: Path, **env: str) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env}
        )


def stop(p: subprocess.Popen[bytes]) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


async def wait_for_file(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(path.exists):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear")
        await asyncio.sleep(0.05)


def intent(i: int) -> messages.Intent:
    return messages.Intent(
        op="provision",
        site=SITE,
        namespace=NAMESPACE,
        name=f"cp-{i:05d}",
        owner=messages.Owner(uid=f"uid-{i}", namespace="default", name=f"cp-{i:05d}", cluster=f"c{i}"),
        generation=1,
        issued_at=dt.datetime.now(dt.UTC),
        spec={
            "controlPlane": {"deployment": {"replicas": 2}, "service": {"serviceType": "LoadBalancer"}},
            "kubernetes": {"version": "v1.31.0", "kubelet": {"cgroupfs": "systemd"}},
        },
    )


async def raw_pull_ack(conn: bus.Connection, count: int, batch: int) -> float:
    """JetStream pull + synchronous ack of ``count`` small messages: the bus alone."""
    name = "BENCHRAW"
    await topology.ensure_stream(conn, streams.StreamDef(name=name, subjects=("benchraw.>",), storage="file"))
    definition = streams.ConsumerDef(stream=name, durable_name="raw", filter_subjects=("benchraw.>",))
    await topology.ensure_consumer(conn, definition)
    payload = messages.encode(intent(0))
    await asyncio.gather(
        *(bus.publish(conn, f"benchraw.{i % 100}.{i}", payload, msg_id=f"raw-{i}") for i in range(count))
    )
    consumer = await bus.bind(conn, definition)
    done, started = 0, time.perf_counter()
    while done < count:
        for d in await consumer.fetch(batch, timeout=2):
            await d.ack()
            done += 1
    elapsed = time.perf_counter() - started
    await consumer.unsubscribe()
    return count / elapsed


async def run(count: int, batch: int, work: Path) -> None:
    port = ports.free_port()
    # TLS as in production: the figures include its cost.
    tls = tlsfiles.generate(work / "tls")
    main_conf, _ = natsserver.nats_config(
        work / "nats", host="127.0.0.1", port=port, store_dir=work / "js", tls=tls
    )
    natsserver.site_add(work / "nats", SITE)
    nats = natsd.NatsServer(
        store_dir=work / "js", port=port, config=main_conf, log_file=work / "nats.log", tls=tls
    )
    nats.start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        kubeconfig = work / "site.kubeconfig"
        crd = ROOT / "sandbox" / "crds" / "tenantcontrolplane.yaml"
        emulator = [
            "-m",
            "sandbox.kubeapi",
            "--port",
            "0",
            "--kubeconfig",
            str(kubeconfig),
            "--crd",
            str(crd),
        ]
        procs.append(spawn([*emulator, "--history", "200000"], work / "kubeapi.log"))
        await wait_for_file(kubeconfig)
        api = await ckube.api_client_from_kubeconfig(kubeconfig)
        kube = ckube.Kube(api)
        for _ in range(100):
            try:
                await kube.create(resources.NAMESPACE, {"metadata": {"name": NAMESPACE}})
                break
            except ckube.errors.KubeError:
                await asyncio.sleep(0.1)
        await api.close()
        procs.append(
            spawn(
                ["-m", "sandbox.kamaji", "--kubeconfig", str(kubeconfig), "--ready-delay", "0"],
                work / "kamaji.log",
            )
        )
        keyfiles.generate(work / "keys")
        signer = keys.load_signing_key((work / "keys" / keyfiles.SIGNING_FILE).read_text())
        conn = await bus.connect(
            bus.Options(servers=(nats.url,), seed_file=work / "nats" / "hub.nk", ca_file=tls.ca), deadline=10
        )
        # The site's stream quota (2,000 control planes by default) scaled to the run: a status
        # and a sealed box per TCP, and the heartbeat.
        limits = streams.SiteLimits(
            max_msgs=max(streams.SITE_MAX_MSGS, 2 * count + 64),
            max_bytes=max(streams.SITE_MAX_BYTES, count * 32 * 1024),
        )
        await bus.ensure_topology(conn, sites=[SITE], limits=limits)
        agent = [
            "-m", "kamaji_broker.cli", "agent", "--site", SITE, "--nats-url", nats.url,
            "--nats-seed", str(work / "nats" / "sites" / f"{SITE}.nk"), "--nats-ca-file", str(tls.ca),
            "--hub-public-keys", str(work / "keys" / keyfiles.PUBLIC_FILE),
            "--kubeconfig", str(kubeconfig), "--namespaces", NAMESPACE, "--listen", "127.0.0.1:0",
            "--fetch-batch", str(batch),
        ]  # fmt: skip
        procs.append(spawn(agent, work / "agent.log", KB_LOG_LEVEL="warning"))
        status_def = streams.hub_consumer(SITE)
        statuses = await bus.bind(conn, status_def)

        started = time.perf_counter()
        publishes = [
            bus.publish(
                conn,
                subjects.intent(SITE, NAMESPACE, i.name),
                messages.encode(signing.sign(i, signer)),
                msg_id=i.name,
            )
            for i in map(intent, range(count))
        ]
        await asyncio.gather(*publishes)
        published = time.perf_counter() - started
        first_seen: dict[str, float] = {}
        ready: dict[str, float] = {}
        deadline = time.monotonic() + max(120.0, count * 0.5)
        while len(ready) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(ready)}/{count} Ready; see {work}/agent.log")
            for d in await statuses.fetch(256, timeout=2):  # the hub's consumer: no acks
                if subjects.parse(d.subject).kind is not subjects.Kind.STATUS:  # heartbeats, sealed boxes
                    continue
                s = messages.decode_status(d.data)
                now = time.perf_counter() - started
                first_seen.setdefault(s.name, now)
                if s.phase == "Ready":
                    ready.setdefault(s.name, now)
        applied_all = max(first_seen.values())
        ready_all = max(ready.values())
        latencies = sorted(ready.values())
        emit("publish_intents", intents=count, intents_per_s=round(count / published, 1))
        emit(
            "provision_applied",
            intents=count,
            per_s=round(count / applied_all, 1),
            seconds=round(applied_all, 2),
        )
        emit(
            "provision_ready",
            intents=count,
            per_s=round(count / ready_all, 1),
            seconds=round(ready_all, 2),
            p50_s=round(latencies[len(latencies) // 2], 2),
            p99_s=round(latencies[int(len(latencies) * 0.99) - 1], 2),
            kamaji_delay_s=0,
        )
        await statuses.unsubscribe()
        # The raw figure on a server of its own without authorisation (the hub's NATS user may
        # not write arbitrary subjects), same binary, same machine, same fetch and ack calls.
        plain = natsd.NatsServer(store_dir=work / "js-raw", log_file=work / "nats-raw.log", tls=tls)
        plain.start()
        try:
            raw_conn = await bus.connect(bus.Options(servers=(plain.url,), ca_file=tls.ca), deadline=10)
            raw = await raw_pull_ack(raw_conn, count, batch)
            await raw_conn.close()
        finally:
            plain.stop()
        emit("raw_pull_ack", messages=count, per_s=round(raw, 1), batch=batch)
        emit("agent_overhead", ratio_raw_over_ready=round(raw / (count / ready_all), 1))
        await conn.close()
    finally:
        for p in reversed(procs):
            stop(p)
        nats.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp:
        asyncio.run(run(args.count, args.batch, Path(tmp)))


if __name__ == "__main__":
    main()
