"""`kamaji-broker agent` as a real process: flags, health endpoints, credentials, shutdown; at an
emulated site and at a real one (as the ServiceAccount the chart makes)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.tcp import legacy, managed
from common import bus
from common import kube as ckube
from common.files import keys as keyfiles
from common.kube import resources
from protocol import keys, messages, sealing, signing, subjects
from sandbox import kamaji, natsd
from tests import conftest, helpers
from tests.agent.conftest import NAMESPACE, intent
from tests.hub import clusters

TCP = resources.TENANT_CONTROL_PLANE


def agent_process(args: list[str], log: Path) -> helpers.CliProcess:
    return helpers.CliProcess("agent", args, log=log, env={"KB_AGENT_HEARTBEAT_INTERVAL": "0.5"})


@dataclass(frozen=True)
class World:
    """NATS in operator mode, the hub's keys, site-a, and the test's hub connection."""

    server: natsd.NatsServer
    conf: Path
    keys_dir: Path
    kubeconfig: Path
    """The agent's: the site's admin on the emulator, the chart's ServiceAccount on a real site."""
    admin: Path
    """The site's admin (the Kamaji simulator, and the test editing a TCP as a site admin would)."""
    hub: bus.Connection


@pytest.fixture
async def world(real_backend: clusters.RealPair | None, tmp_path: Path) -> AsyncIterator[World]:
    """An emulated site, or the session's real one with the agent's RBAC for ``tenants`` as the
    chart installs it; a nats-server of the test's own (its streams hold this test's messages
    only, whichever backend ran before)."""
    server, conf = conftest.operator_mode_server(tmp_path / "nats")
    keyfiles.generate(tmp_path / "keys")
    async with contextlib.AsyncExitStack() as stack:
        server.start()
        stack.callback(server.stop)
        site = clusters.real(real_backend) if real_backend else clusters.emulated(tmp_path)
        c = await stack.enter_async_context(site)
        hub = await bus.connect(
            helpers.options(server.url, seed_file=helpers.identity_file(conf, "hub")), deadline=10
        )
        stack.push_async_callback(hub.close)
        await bus.ensure_topology(hub, sites=["site-a", "site-b"])
        yield World(server, conf, tmp_path / "keys", c.agent, c.site, hub)


def agent_args(w: World, site: str) -> list[str]:
    """The agent's flags with the NATS identity of ``site``."""
    seed = helpers.identity_file(w.conf, f"sites/{site}")
    return [
        "--site", "site-a", "--nats-url", w.server.url, *helpers.identity_flag(seed),
        "--hub-public-keys", str(w.keys_dir / "hub-public-keys.json"), "--kubeconfig", str(w.kubeconfig),
        "--namespaces", NAMESPACE,
    ]  # fmt: skip


async def test_agent_process_applies_intents_and_stops_cleanly(world: World, tmp_path: Path) -> None:
    conf, keys_dir, hub = world.conf, world.keys_dir, world.hub
    proc = agent_process(agent_args(world, "site-a"), tmp_path / "agent.log")
    try:
        text = await proc.readyz(lambda status, _: status == 200)
        assert "[+] consumer" in text and "[+] nats" in text and "[+] kubernetes" in text
        assert (await proc.get("/healthz"))[0] == 200
        signer = keys.load_signing_key((keys_dir / keyfiles.SIGNING_FILE).read_text())
        sent = signing.sign(intent("proc"), signer)
        await bus.publish(
            hub, subjects.intent("site-a", NAMESPACE, "proc"), messages.encode(sent), msg_id="proc-1"
        )
        async with kamaji.Simulator(str(world.admin), ready_delay=0.2):
            ready = await _status(hub, "proc", "Ready")
        assert ready.intent_seq > 0 and ready.endpoint is not None
        stored = await bus.last_message(hub, "KB_SITE_site-a", subjects.secret("site-a", NAMESPACE, "proc"))
        assert stored is not None
        sealed = messages.decode_sealed_secrets(stored.data)
        ring = sealing.Keyring(
            keys.load_sealing_key(p.read_text()) for p in (keys_dir / "sealing").glob("*.key")
        )
        payload = messages.decode_secrets_payload(
            ring.open(sealed.ciphertext, key_id=sealed.recipient_key_id)
        )
        assert "BEGIN CERTIFICATE" in payload.ca_crt and "clusters" in payload.kubeconfig
        beats: list[messages.Heartbeat] = []

        async def heartbeat() -> bool:
            stored = await bus.last_message(hub, "KB_SITE_site-a", subjects.heartbeat("site-a"))
            beats[:] = [messages.decode_heartbeat(stored.data)] if stored else []
            return bool(beats) and beats[0].managed == 1 and beats[0].ready == 1

        await helpers.eventually(heartbeat, within=20)
        assert beats[0].kamaji_detected and beats[0].last_intent_seq >= ready.intent_seq
        _, metrics = await proc.get("/metrics")
        assert 'kb_agent_intents_total{op="provision",result="applied"} 1.0' in metrics
        assert "kb_agent_nats_connected 1.0" in metrics
        assert "kb_agent_secrets_published_total 1.0" in metrics
        assert f'kb_agent_info{{site="site-a",version="{beats[0].agent_version}"}} 1.0' in metrics
    finally:
        code = proc.stop()
    assert code == 0
    log = proc.log.read_text()
    signing_key = (keys_dir / keyfiles.SIGNING_FILE).read_text().strip()
    seed = helpers.seed_of(helpers.identity_file(conf, "sites/site-a"))
    assert signing_key not in log and seed not in log


async def test_an_edit_at_the_site_is_reverted_from_the_watch_not_at_the_resync(
    world: World, tmp_path: Path
) -> None:
    """With an hour between anti-entropy passes, a site admin's edit of the version
    and the replicas (fields the agent owns: the edit makes the admin their manager) is reported
    (metric, log) and undone from the TCP watch event by a forced apply, and the hub hears Ready
    again; the service label the admin set beside them, a field the agent does not set, stays
    the admin's."""
    keys_dir, hub = world.keys_dir, world.hub
    proc = agent_process([*agent_args(world, "site-a"), "--resync-interval", "1h"], tmp_path / "agent.log")
    api = await ckube.api_client_from_kubeconfig(world.admin)
    site = ckube.Kube(api)
    try:
        # Not waiting for /readyz: the intent waits in the durable consumer until the agent binds
        # (which took over 20 s on the shared machine under load), and the outcome is what counts.
        signer = keys.load_signing_key((keys_dir / keyfiles.SIGNING_FILE).read_text())
        sent = signing.sign(intent("edited"), signer)
        await bus.publish(
            hub, subjects.intent("site-a", NAMESPACE, "edited"), messages.encode(sent), msg_id="edited-1"
        )
        async with kamaji.Simulator(str(world.admin), ready_delay=0.2):
            await _status(hub, "edited", "Ready", within=60)
            edit = {
                "kubernetes": {"version": "v1.20.0"},
                "controlPlane": {
                    "deployment": {"replicas": 5},
                    "service": {"additionalMetadata": {"labels": {"owner": "site-admin"}}},
                },
            }
            await site.patch(TCP, "edited", {"spec": edit}, namespace=NAMESPACE)

            async def reverted() -> bool:
                obj = await site.get(TCP, "edited", namespace=NAMESPACE)
                spec = obj["spec"]
                replicas = spec["controlPlane"]["deployment"]["replicas"]
                return bool(spec["kubernetes"]["version"] == "v1.31.0" and replicas == 2)

            await helpers.eventually(reverted, within=60)  # the resync would come after 1 h
            ready = await _status(hub, "edited", "Ready", within=60)
        assert ready.version == "v1.31.0"
        obj = await site.get(TCP, "edited", namespace=NAMESPACE)
        assert obj["spec"]["controlPlane"]["service"]["additionalMetadata"]["labels"] == {
            "owner": "site-admin"
        }
        managers = {(e["manager"], e["operation"]): e["fieldsV1"] for e in obj["metadata"]["managedFields"]}
        ours = managers[("kamaji-broker-agent", "Apply")]["f:spec"]
        assert "f:version" in ours["f:kubernetes"] and "f:replicas" in ours["f:controlPlane"]["f:deployment"]
        assert "f:additionalMetadata" not in ours["f:controlPlane"]["f:service"]
        _, metrics = await proc.get("/metrics")
        assert "kb_agent_drift_reverted_total 1.0" in metrics
    finally:
        await api.close()
        code = proc.stop()
    assert code == 0
    assert "reverted drift of TenantControlPlane tenants/edited" in proc.log.read_text()


async def test_a_tcp_an_older_agent_wrote_is_handed_over_and_what_it_no_longer_wants_goes(
    world: World, tmp_path: Path
) -> None:
    """An older agent created its TCPs (an Update in managedFields under its HTTP client's name)
    and recorded its fields in annotations. The agent gives that entry's fields to its own
    Apply before applying: a certSAN the intent no longer sets is removed, and so are the old
    annotations; nothing of the older agent's stays owned apart."""
    hub = world.hub
    signer = keys.load_signing_key((world.keys_dir / keyfiles.SIGNING_FILE).read_text())
    want = intent("older")
    ack = await bus.publish(
        hub,
        subjects.intent("site-a", NAMESPACE, "older"),
        messages.encode(signing.sign(want, signer)),
        msg_id="older-1",
    )
    # The TCP as the older agent left it for that intent: one more certSAN, its annotations.
    body = managed.desired(want, seq=ack.seq)
    body["spec"]["networkProfile"] = {"certSANs": ["old.example.com"]}
    notes = {
        legacy.APPLIED_FIELDS: "spec.kubernetes.version,spec.networkProfile.certSANs",
        legacy.APPLIED_HASH: "x",
    }
    body["metadata"]["annotations"].update(notes)
    api = await ckube.api_client_from_kubeconfig(world.admin)
    site = ckube.Kube(api)
    older = "OpenAPI-Generator"  # the manager a request without fieldManager gets: its User-Agent
    query = [("fieldManager", older)]
    await site._call("POST", TCP.path(NAMESPACE, None), query=query, body=body)
    proc = agent_process(agent_args(world, "site-a"), tmp_path / "agent.log")
    try:

        async def handed_over() -> dict[str, Any] | None:
            obj = await site.get(TCP, "older", namespace=NAMESPACE)
            return obj if not obj["spec"].get("networkProfile", {}).get("certSANs") else None

        obj = await helpers.eventually(handed_over, lambda o: o is not None, within=60)
    finally:
        await api.close()
        code = proc.stop()
    assert code == 0
    assert obj is not None and not set(notes) & set(obj["metadata"]["annotations"])
    managers = {(e["manager"], e["operation"]): e["fieldsV1"] for e in obj["metadata"]["managedFields"]}
    assert (older, "Update") not in managers
    ours = managers[(managed.MANAGER, "Apply")]
    assert "f:version" in ours["f:spec"]["f:kubernetes"] and "f:networkProfile" not in ours["f:spec"]
    assert "took over the fields an older agent applied" in proc.log.read_text()


async def test_credentials_of_another_site_are_a_clear_configuration_error(
    world: World, tmp_path: Path
) -> None:
    proc = agent_process(agent_args(world, "site-b"), tmp_path / "agent.log")
    try:
        text = await proc.readyz(lambda status, text: status == 503 and "permission denied" in text)
        assert "configuration error" in text and "_INBOX_site-a" in text
        # Three seconds of the agent's own log time (its heartbeat is denied every 0.5 s), however
        # slowly a loaded machine runs it: long enough for a tight retry loop to show in the log.
        await helpers.eventually(lambda: _log_span(proc.log) >= 4.0, within=60, what="4 s of log time")
        assert proc.p.poll() is None  # alive, waiting for a human to fix the credentials
    finally:
        assert proc.stop() == 0
    # The intents consumer is retried slowly, not in a tight loop of timeouts. (Other loops
    # report their own denials at their own pace: the heartbeat runs every 0.5 s here.)
    denied = [r for r in _log_records(proc.log) if "_INBOX_site-a" in r["message"]]
    assert denied, "the denial is logged, naming the subject"
    within_3s = [r for r in denied if _at(r) - _at(denied[0]) <= 3.0]
    assert len(within_3s) <= 6, within_3s


def test_bad_flags_name_the_flag(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kamaji_broker.cli", "agent", "--site", "site-a", "--nats-url", "nats://127.0.0.1:1",
         "--nats-seed", str(tmp_path / "missing.nk"), "--resync-interval", "soon"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 2
    assert "--nats-seed: file" in out.stderr and "does not exist" in out.stderr
    assert "--resync-interval: invalid duration 'soon'" in out.stderr
    assert "--hub-public-keys: required" in out.stderr


async def _status(hub: bus.Connection, name: str, phase: str, *, within: float = 20) -> messages.Status:
    found: list[messages.Status] = []

    async def check() -> bool:
        stored = await bus.last_message(hub, "KB_SITE_site-a", subjects.status("site-a", NAMESPACE, name))
        found[:] = [messages.decode_status(stored.data)] if stored else []
        return bool(found) and found[0].phase == phase

    await helpers.eventually(check, within=within)
    return found[0]


def _log_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def _at(record: dict[str, Any]) -> float:
    return dt.datetime.fromisoformat(record["time"].replace("Z", "+00:00")).timestamp()


def _log_span(path: Path) -> float:
    """Seconds between the first and the last line of a JSON log."""
    records = _log_records(path)
    return _at(records[-1]) - _at(records[0]) if records else 0.0
