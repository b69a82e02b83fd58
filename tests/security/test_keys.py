"""Attacks with hub keys that were rotated out and retired.

The attacker holds the old private keys (that is why they were retired). Before `keys retire`
existed a rotated-out signing key stayed trusted forever: an intent it signed was applied. Each
case asserts the exact refusal (the agent's ``kb_agent_intents_total`` result, the hub's
DecryptFailed and its counter, the CLI's error naming the file), that nothing changed (the TCP,
the consumer's state, the key files) and that the process involved lives on.
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from common import bus
from common import kube as ckube
from common.files import keys as keyfiles
from common.kube import resources
from kamaji_broker import cli
from protocol import keys, messages, signing, streams, subjects
from sandbox import kamaji, kubeapi, natsd
from tests import helpers
from tests.security import keys_support as ks

TCP = resources.TENANT_CONTROL_PLANE
PAYLOAD = messages.SecretsPayload(kubeconfig="apiVersion: v1\nkind: Config\n", ca_crt="CRT", ca_key="CA-KEY")


def spec(replicas: int) -> dict[str, Any]:
    return {
        "controlPlane": {"deployment": {"replicas": replicas}, "service": {"serviceType": "LoadBalancer"}},
        "kubernetes": {"version": "v1.31.0", "kubelet": {"cgroupfs": "systemd"}},
    }


def intent(
    name: str = "cp1", *, replicas: int = 2, generation: int = 1, op: str = "provision"
) -> messages.Intent:
    i = helpers.intent(
        site=ks.SITE, namespace=ks.NAMESPACE, name=name, generation=generation, spec=spec(replicas)
    )
    return msgspec.structs.replace(i, op=op, spec={} if op == "delete" else i.spec)


# -- how the agent learned of the retirement -------------------------------------------------


def redeployed(c: ks.Compromised) -> Path:
    """The operator redeployed hub-public-keys.json after `keys retire` (the documented way)."""
    return c.public_file


def stale_merge(c: ks.Compromised) -> Path:
    """A copy from before the retirement merged back in: the old key listed again, and retired."""
    public = keyfiles.load_public_keys(c.public_file)
    old = keys.public_entry(bytes(c.old_signer.verify_key), created_at=helpers.T0)
    path = c.out.parent / "merged.json"
    merged = msgspec.structs.replace(public, signing=(old, *public.signing))
    path.write_bytes(keys.encode_public_keys(merged))
    return path


def dropped_by_hand(c: ks.Compromised) -> Path:
    """No retired list, the old key simply gone from the file: refused as an unknown key."""
    public = keyfiles.load_public_keys(c.public_file)
    path = c.out.parent / "dropped.json"
    path.write_bytes(keys.encode_public_keys(msgspec.structs.replace(public, retired=())))
    return path


@dataclass(frozen=True)
class Forged:
    name: str
    attack: messages.Intent
    """Signed with the retired key."""
    learned: Callable[[ks.Compromised], Path]
    result: str
    existing: bool = True


FORGED = [
    Forged("rollback-replicas", intent(replicas=5, generation=2), redeployed, "retired_key"),
    Forged("create-new-tcp", intent("evil", replicas=9), redeployed, "retired_key", existing=False),
    Forged("delete-existing", intent(op="delete", generation=2), redeployed, "retired_key"),
    Forged("stale-file-lists-it-again", intent(replicas=5, generation=2), stale_merge, "retired_key"),
    Forged(
        "dropped-without-retired-list", intent(replicas=5, generation=2), dropped_by_hand, "bad_signature"
    ),
]


async def _tcp(kube: ckube.Kube, name: str, check: Callable[[dict[str, Any] | None], bool]) -> dict[str, Any]:
    found: list[dict[str, Any]] = []

    async def probe() -> bool:
        obj = await kube.get_or_none(TCP, name, namespace=ks.NAMESPACE)
        if obj is not None and check(obj):
            found[:] = [obj]
            return True
        return False

    await helpers.eventually(probe, within=15)
    return found[0]


def _ready(obj: dict[str, Any] | None) -> bool:
    status = (obj or {}).get("status") or {}
    return ((status.get("kubernetesResources") or {}).get("version") or {}).get("status") == "Ready"


@pytest.mark.parametrize("case", FORGED, ids=[c.name for c in FORGED])
async def test_an_intent_signed_by_a_retired_key_is_refused(
    case: Forged, conn: bus.Connection, prefix: str, kube: ckube.Kube, tmp_path: Path
) -> None:
    c = ks.rotate_and_retire(tmp_path / "keys")
    await kube.create(resources.NAMESPACE, {"metadata": {"name": ks.NAMESPACE}})
    await bus.ensure_topology(conn, sites=[ks.SITE], prefix=prefix)
    intents_stream = streams.stream_name(subjects.Kind.INTENT, prefix=prefix)
    status_stream = streams.site_stream_name("site-a", prefix=prefix)
    ids = iter(range(100))

    async def send(i: messages.Intent, signer: Any) -> int:
        subject = subjects.intent(i.site, i.namespace, i.name, prefix=prefix)
        data = messages.encode(signing.sign(i, signer))
        return (await bus.publish(conn, subject, data, msg_id=f"{case.name}-{next(ids)}")).seq

    async with (
        kamaji.Simulator(kube.api_client, ready_delay=0.2, delete_delay=0.3),
        ks.running_agent(conn, kube, public_file=case.learned(c), prefix=prefix) as agent,
    ):
        before: dict[str, Any] | None = None
        if case.existing:
            await send(intent(), c.signer)
            before = await _tcp(kube, "cp1", _ready)
        status_subject = subjects.status(ks.SITE, ks.NAMESPACE, case.attack.name, prefix=prefix)
        status_before = await bus.last_message(conn, status_stream, status_subject)

        await send(case.attack, c.old_signer)

        async def refused() -> bool:
            return agent.count(case.result) == 1

        await helpers.eventually(refused, within=15)

        # Terminated, not left to redeliver (its settlement is flushed with its batch, after the
        # count); nothing reported for it; the TCP as it was.
        async def settled() -> tuple[int, int]:
            state = await bus.consumer_info(conn, intents_stream, f"agent-{ks.SITE}")
            return state.num_pending, state.num_ack_pending

        await helpers.eventually(
            settled, lambda pending: pending == (0, 0), what="the refused intent settled"
        )
        assert await bus.last_message(conn, status_stream, status_subject) == status_before
        after = await kube.get_or_none(TCP, case.attack.name, namespace=ks.NAMESPACE)
        if before is None:
            assert after is None
        else:
            assert after is not None and not after["metadata"].get("deletionTimestamp")
            assert (after["metadata"]["uid"], after["spec"]) == (before["metadata"]["uid"], before["spec"])
            assert after["metadata"]["annotations"] == before["metadata"]["annotations"]
        # Alive, and the key in use still works.
        assert agent.alive and agent.readiness.ready
        await send(intent(case.attack.name, replicas=3, generation=3), c.signer)
        await _tcp(
            kube, case.attack.name, lambda o: (o or {})["spec"]["controlPlane"]["deployment"]["replicas"] == 3
        )
        assert agent.count(case.result) == 1 and agent.alive


# -- the hub and boxes sealed to a retired key -----------------------------------------------


def removed(c: ks.Compromised) -> None:
    """The documented way: the hub's sealing-keys Secret replaced, the old file gone."""


def left_by_kubectl_apply(c: ks.Compromised) -> None:
    """`kubectl apply` of the new Secret keeps entries it did not create: the old file is still
    mounted next to retired.json."""
    files = c.out / keyfiles.SEALING_DIR / f"{c.old_sealing_id}.key"
    files.write_text(c.old_sealing_text)
    os.chmod(files, 0o440)


@pytest.mark.parametrize(
    "mounted", [removed, left_by_kubectl_apply], ids=["file-removed", "file-left-behind"]
)
async def test_a_box_sealed_to_a_retired_key_is_not_opened_by_the_hub(
    mounted: Callable[[ks.Compromised], None], conn: bus.Connection, topology: str, tmp_path: Path
) -> None:
    c = ks.rotate_and_retire(tmp_path / "keys")
    mounted(c)
    secrets_stream = streams.site_stream_name("site-a", prefix=topology)
    subject = subjects.secret(ks.SITE, ks.NAMESPACE, "cp1", prefix=topology)
    cp1 = ("site-a", "tenants", "cp1")

    async def seal_and_send(recipient: keys.PublicKey) -> int:
        data = messages.encode(ks.sealed_to(recipient, PAYLOAD))
        return (await bus.publish(conn, subject, data, msg_id=recipient.key_id)).seq

    async with ks.running_ingest(conn, sealing_dir=c.out / keyfiles.SEALING_DIR, prefix=topology) as hub:
        seq = await seal_and_send(c.old_sealing_public())

        async def recorded() -> bool:
            held = hub.obs.get(cp1)
            return held is not None and held.sealed_seq == seq

        await helpers.eventually(recorded)
        held = hub.obs.get(cp1)
        assert held is not None and held.secrets_error is not None
        assert held.secrets_error.reason == "DecryptFailed"  # what SecretsSynced shows
        assert f"sealed to retired key id '{c.old_sealing_id}'" in held.secrets_error.message
        assert hub.rejected(secrets_stream, "DecryptFailed") == 1.0
        assert c.old_sealing_id not in hub.ingest.intake.deps.keyring.key_ids
        # Alive, and a box re-sealed to the current key opens.
        newer = await seal_and_send(c.sealing_public())

        async def healed() -> bool:
            h = hub.obs.get(cp1)
            return h is not None and h.sealed_seq == newer

        await helpers.eventually(healed)
        held = hub.obs.get(cp1)
        assert held is not None and held.secrets_error is None
        opened = await hub.ingest.intake.open_latest(cp1)
        assert opened is not None and opened[1] == PAYLOAD
        assert not hub.task.done()


# -- key files the hub and agent refuse ------------------------------------------------------


def _b64(n: int) -> str:
    return base64.b64encode(b"\x01" * n).decode() + "\n"


def _sealing_file(out: Path) -> Path:
    return sorted((out / keyfiles.SEALING_DIR).glob("*.key"))[-1]


def _chmod(mode: int) -> Callable[[Path], None]:
    return lambda p: os.chmod(p, mode)


def _write(text: str) -> Callable[[Path], None]:
    def write(p: Path) -> None:
        p.write_text(text)

    return write


def _misname(p: Path) -> None:
    p.rename(p.with_name("0123456789abcdef.key"))


BAD_FILES = [
    # (id, process, which file, how it is spoiled, what the error says after the file's name)
    (
        "signing-world-readable",
        "hub",
        lambda o: o / "signing.key",
        _chmod(0o644),
        "permissions 0644 let others",
    ),
    (
        "signing-not-base64",
        "hub",
        lambda o: o / "signing.key",
        _write("not a key!!\n"),
        "signing key: not base64",
    ),
    (
        "signing-31-bytes",
        "hub",
        lambda o: o / "signing.key",
        _write(_b64(31)),
        "expected 32 bytes of key, got 31",
    ),
    ("sealing-world-writable", "hub", _sealing_file, _chmod(0o602), "permissions 0602 let others"),
    ("sealing-33-bytes", "hub", _sealing_file, _write(_b64(33)), "expected 32 bytes of key, got 33"),
    ("sealing-misnamed", "hub", _sealing_file, _misname, "not 0123456789abcdef"),
    (
        "retired-list-malformed",
        "hub",
        lambda o: o / "sealing" / keyfiles.RETIRED_FILE,
        _write('{"retired": ["../signing"]}'),
        "retired must be a list of key ids",
    ),
    (
        "public-keys-truncated",
        "agent",
        lambda o: o / keyfiles.PUBLIC_FILE,
        _write('{"schema": "kam'),
        "invalid hub public keys",
    ),
    (
        "public-keys-bad-retired-id",
        "agent",
        lambda o: o / keyfiles.PUBLIC_FILE,
        _write('{"schema": "kamaji-broker.io/hub-public-keys/v1", "retired": ["ABC"]}'),
        "retired 'ABC' is not a key id",
    ),
]


@pytest.mark.parametrize(
    ("process", "target", "spoil", "says"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES]
)
def test_a_bad_key_file_is_refused_naming_the_file(
    process: str, target: Callable[[Path], Path], spoil: Callable[[Path], None], says: str, tmp_path: Path
) -> None:
    c = ks.rotate_and_retire(tmp_path / "keys")
    path = target(c.out)
    secrets = [p.read_text() for p in (c.out / "signing.key", *(c.out / "sealing").glob("*.key"))]
    spoil(path)
    seed, kubeconfig = tmp_path / "seed.nk", tmp_path / "kubeconfig"
    seed.write_text("placeholder")
    kubeconfig.write_text("placeholder")
    common = ["--nats-url", "nats://127.0.0.1:1", "--nats-seed", str(seed), "--kubeconfig", str(kubeconfig)]
    if process == "hub":
        args = ["hub", *common, "--all-namespaces", "--signing-key", str(c.out / "signing.key"),
                "--sealing-keys", str(c.out / "sealing")]  # fmt: skip
    else:
        args = ["agent", *common, "--site", "site-a", "--namespaces", "tenants",
                "--hub-public-keys", str(c.public_file)]  # fmt: skip
    env = {**os.environ, "KB_HUB_LISTEN": "127.0.0.1:0", "KB_AGENT_LISTEN": "127.0.0.1:0"}
    done = subprocess.run(
        [sys.executable, "-m", "kamaji_broker.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    shown = path.with_name("0123456789abcdef.key") if spoil is _misname else path
    assert done.returncode == 2, done.stderr
    assert f"kamaji-broker {process}: error: {shown}: " in done.stderr and says in done.stderr, done.stderr
    for text in secrets:
        assert text.strip() not in done.stderr + done.stdout


@pytest.mark.parametrize("mode", [0o640, 0o604], ids=["group-readable", "world-readable"])
def test_the_keys_command_refuses_a_key_file_others_can_read(
    mode: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    c = ks.rotate_and_retire(tmp_path / "keys")
    os.chmod(c.out / "signing.key", mode)
    capsys.readouterr()
    assert cli.main(["keys", "generate", "--out", str(c.out), "--print-secret", "x"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"{c.out / 'signing.key'}: permissions {mode:04o} let " in err


# -- no trace of a retired key ---------------------------------------------------------------


def test_retiring_leaves_no_trace_of_the_private_key_on_disk(tmp_path: Path) -> None:
    c = ks.rotate_and_retire(tmp_path / "keys")
    raw = bytes(c.old_sealer)
    for path in (p for p in c.out.rglob("*") if p.is_file()):
        content = path.read_bytes()
        assert raw not in content and c.old_sealing_text.strip().encode() not in content, path
    assert sorted(p.name for p in (c.out / "sealing").iterdir()) == sorted(
        [f"{keys.key_id(bytes(c.sealer.public_key))}.key", keyfiles.RETIRED_FILE]
    )


def _print_secret(out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(["keys", "generate", "--out", str(out), "--print-secret", "hub-keys"])
    printed, err = capsys.readouterr()
    return code, printed, err


def test_print_secret_never_includes_a_retired_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    c = ks.rotate_and_retire(tmp_path / "keys")
    code, printed, _ = _print_secret(c.out, capsys)
    assert code == 0
    data = yaml.safe_load(printed)["stringData"]
    assert f"sealing-{c.old_sealing_id}.key" not in data
    for material in (
        c.old_sealing_text.strip(),
        keys.to_text(bytes(c.old_sealer.public_key)),
        keys.to_text(bytes(c.old_signer.verify_key)),
        keys.to_text(bytes(c.old_signer)),
    ):
        assert material not in printed
    public = keys.decode_public_keys(data[keyfiles.PUBLIC_FILE])
    assert set(public.retired) == {c.old_signing_id, c.old_sealing_id}
    assert c.old_signing_id not in public.verify_keys() and c.old_sealing_id != public.newest_sealing().key_id


def test_print_secret_refuses_a_retired_key_restored_from_a_backup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    c = ks.rotate_and_retire(tmp_path / "keys")
    restored = c.out / "sealing" / f"{c.old_sealing_id}.key"
    restored.write_text(c.old_sealing_text)
    os.chmod(restored, 0o600)
    code, printed, err = _print_secret(c.out, capsys)
    assert (code, printed) == (2, "")
    assert f"{restored}: holds retired key id {c.old_sealing_id}" in err
    assert c.old_sealing_text.strip() not in err


# -- the agent process, as deployed ----------------------------------------------------------


async def test_the_agent_process_refuses_a_retired_key_and_shows_the_keys_it_trusts(
    secured_nats: tuple[natsd.NatsServer, Path], cluster: kubeapi.Server, tmp_path: Path
) -> None:
    """`kamaji-broker agent --hub-public-keys` of a directory after `keys retire`: the wiring of
    agent.main, not only the apply loop, refuses the old key by name."""
    server, conf = secured_nats
    c = ks.rotate_and_retire(tmp_path / "keys")
    kubeconfig = cluster.write_kubeconfig(tmp_path / "site.kubeconfig")
    api = await ckube.api_client_from_kubeconfig(kubeconfig)
    site = ckube.Kube(api)
    await site.create(resources.NAMESPACE, {"metadata": {"name": ks.NAMESPACE}})
    hub = await bus.connect(
        helpers.options(server.url, seed_file=helpers.identity_file(conf, "hub")), deadline=10
    )
    await bus.ensure_topology(hub, sites=[ks.SITE])
    proc = helpers.CliProcess(
        "agent",
        [
            "--site",
            ks.SITE,
            "--nats-url",
            server.url,
            *helpers.identity_flag(helpers.identity_file(conf, "sites/site-a")),
            "--hub-public-keys",
            str(c.public_file),
            "--kubeconfig",
            str(kubeconfig),
            "--namespaces",
            ks.NAMESPACE,
        ],
        log=tmp_path / "agent.log",
    )
    try:
        await proc.readyz(lambda status, _: status == 200)
        forged = signing.sign(intent("evil", replicas=9), c.old_signer)
        subject = subjects.intent(ks.SITE, ks.NAMESPACE, "evil")
        await bus.publish(hub, subject, messages.encode(forged), msg_id="evil-1")
        metrics: list[str] = []

        async def counted() -> bool:
            metrics[:] = [(await proc.get("/metrics"))[1]]
            return 'kb_agent_intents_total{op="unknown",result="retired_key"} 1.0' in metrics[0]

        await helpers.eventually(counted, within=20)
        new_signing, new_sealing = (
            keys.key_id(bytes(c.signer.verify_key)),
            keys.key_id(bytes(c.sealer.public_key)),
        )
        assert f'kb_agent_hub_key{{key_id="{new_signing}",use="signing"}} 1.0' in metrics[0]
        assert f'kb_agent_hub_key{{key_id="{new_sealing}",use="sealing"}} 1.0' in metrics[0]
        assert c.old_signing_id not in metrics[0] and c.old_sealing_id not in metrics[0]
        assert await site.get_or_none(TCP, "evil", namespace=ks.NAMESPACE) is None

        async def settled() -> tuple[int, int]:
            # The refusal is counted before its ack (batched, flushed with its batch) reaches the server.
            state = await bus.consumer_info(hub, "KB_INTENTS", f"agent-{ks.SITE}")
            return state.num_pending, state.num_ack_pending

        await helpers.eventually(
            settled, lambda pending: pending == (0, 0), what="the refused intent settled"
        )
        assert proc.p.poll() is None and (await proc.get("/readyz"))[0] == 200
    finally:
        code = await asyncio.to_thread(proc.stop)
        await hub.close()
        await api.close()
    assert code == 0
    log = proc.log.read_text()
    assert f"trusting hub signing key ids {keys.key_id(bytes(c.signer.verify_key))}" in log
    assert f"refused intent on {subject}" in log and f"retired key id '{c.old_signing_id}'" in log
