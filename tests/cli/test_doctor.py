"""`kamaji-broker doctor agent|hub` as a child process against a real nats-server (operator mode,
TLS) and the Kubernetes emulator, with one fault each, asserting the FAIL line, its fix and the
exit code. No agent runs here (a running one, live and stopped: test_doctor_running.py)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.credential import state
from common import bus
from common import kube as ckube
from common.files import keys as keyfiles
from common.files import operator, tls
from hub import rbac as hub_rbac
from protocol import credentials, natsjwt, subjects
from sandbox import kubeapi, natsd, ports
from tests import conftest, helpers
from tests.agent import hub_credentials
from tests.cli.doctor_support import Setup, doctor, prepare

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def setup(
    secured_nats: tuple[natsd.NatsServer, Path], cluster: kubeapi.Server, tmp_path: Path
) -> Setup:
    return await prepare(secured_nats, cluster, tmp_path)


@contextlib.asynccontextmanager
async def admin(kubeconfig: Path) -> AsyncIterator[ckube.Kube]:
    kube = await ckube.connect(in_cluster=False, kubeconfig=kubeconfig)
    try:
        yield kube
    finally:
        await kube.close()


def minted(conf: Path, site: str, *, now: dt.datetime, lifetime: dt.timedelta) -> tuple[bytes, str]:
    """A site user's seed and JWT, minted as the hub mints them (by the account's signing key)."""
    keys = operator.Keys.load_or_create(conf)
    seed = natsjwt.new_seed("user")
    claims = credentials.site_user(
        site, natsjwt.public_of(seed), account=keys.account_public, now=now, lifetime=lifetime
    )
    return seed, natsjwt.encode(claims, natsjwt.key_pair(keys.account_signing))


async def test_agent_nats_unreachable(setup: Setup) -> None:
    url = f"tls://127.0.0.1:{ports.free_port()}"
    run = await doctor("agent", *setup.agent(over={"--nats-url": url}))
    assert run.code == 1
    line = run.line("FAIL", "nats reachable")
    assert "refused: " in line and f"fix: nothing listens at --nats-url ({url})" in line
    assert (
        run.line("SKIP", "tls verified") == "SKIP tls verified not connected, for a reason other than TLS\n"
    )
    assert run.line("SKIP", "permission granted") == "SKIP permission granted needs nats reachable (FAIL)\n"
    assert run.line("SKIP", "consumer bound") == "SKIP consumer bound needs permission granted (SKIP)\n"
    run.line("PASS", "rbac")  # the checks that do not need NATS still run
    assert run.err == ""  # the connection attempts' log lines only with -v


async def test_agent_wrong_ca(setup: Setup, tmp_path: Path) -> None:
    other = tls.generate(tmp_path / "other-ca")
    run = await doctor("agent", *setup.agent(over={"--nats-ca-file": str(other.ca)}))
    assert run.code == 1
    assert "tls: " in run.line("FAIL", "nats reachable")
    line = run.line("FAIL", "tls verified")
    assert f"did not verify against CA file {other.ca}" in line
    assert "fix: give --nats-ca-file the CA that signed the server's certificate" in line


async def test_agent_expired_credential_in_its_identity_secret(setup: Setup) -> None:
    """Operator mode: the identity Secret's JWT expired (renewal failed for too long)."""
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(hours=3)
    seed, token = minted(setup.conf, "site-a", now=long_ago, lifetime=dt.timedelta(hours=1))
    async with admin(setup.kubeconfig) as kube:
        await kube.create(ckube.resources.NAMESPACE, {"metadata": {"name": "kb"}})
        secret = state.body("kb", "agent-identity", seed=seed, jwt=token, resource_version=None)
        await kube.create(ckube.resources.SECRET, secret, namespace="kb")
    flags = setup.agent(over={"--nats-identity-secret": "kb/agent-identity"})
    at = flags.index("--nats-creds")
    run = await doctor("agent", *flags[:at], *flags[at + 2 :])
    assert run.code == 1
    line = run.line("FAIL", "credential valid")
    assert "Secret kb/agent-identity: site:site-a: JWT expired at" in line
    assert "fix: the agent renews its JWT from the hub" in line and "--nats-bootstrap-creds" in line
    assert run.line("SKIP", "nats reachable") == "SKIP nats reachable no usable NATS credential (see above)\n"
    assert seed.decode() not in run.out and token not in run.out


async def test_agent_fresh_operator_install_checks_its_bootstrap_credential(
    setup: Setup, tmp_path: Path
) -> None:
    """Operator mode before the agent's first start: no identity Secret yet, and the bootstrap
    .creds the operator handed over. Doctor checks that credential and connects with it, but
    never asks the hub with it (that would use it up); without it, the install cannot start."""
    creds = hub_credentials.bootstrap_creds(setup.conf, tmp_path / "bootstrap.creds")
    flags = setup.agent(over={"--nats-identity-secret": "kb/agent-identity"})
    at = flags.index("--nats-creds")
    flags = flags[:at] + flags[at + 2 :]
    asked: list[str] = []

    async def note(msg: bus.Message) -> None:
        asked.append(msg.subject)

    hub = await bus.connect(helpers.options(setup.url, seed_file=setup.conf / "hub.creds"), deadline=10)
    try:
        await hub.subscribe("kb.bootstrap.>", note)
        run = await doctor("agent", *flags, "--nats-bootstrap-creds", str(creds))
        await hub.sync()
    finally:
        await hub.close()
    assert run.code == 0, run.out + run.err
    assert asked == []
    line = run.line("PASS", "credential valid")
    assert (
        f"Secret kb/agent-identity does not exist: no identity yet: will bootstrap with {creds} "
        "(bootstrap:site-a: JWT valid until " in line
    ), line
    assert "exactly what site site-a's bootstrap needs (1 publish, 1 subscribe)" in run.line(
        "PASS", "credential permissions"
    )
    assert f"as --nats-bootstrap-creds {creds}" in run.line("PASS", "nats reachable")
    run.line("PASS", "tls verified")
    why = "the agent has no credential of its own yet: it bootstraps at its first start\n"
    for check in ("permission granted", "permission not probed", "consumer bound"):
        assert run.line("SKIP", check) == f"SKIP {check} {why}"
    assert natsjwt.jwt_of_creds(creds.read_text()) not in run.out

    run = await doctor("agent", *flags)  # no --nats-bootstrap-creds either
    assert run.code == 1
    line = run.line("FAIL", "credential valid")
    assert "Secret kb/agent-identity does not exist: no identity yet" in line
    assert "fix: the agent renews its JWT from the hub" in line and "--nats-bootstrap-creds" in line
    assert run.line("SKIP", "nats reachable") == "SKIP nats reachable no usable NATS credential (see above)\n"


async def test_agent_credential_of_another_site(setup: Setup) -> None:
    run = await doctor("agent", *setup.agent(creds=setup.conf / "sites" / "site-b.creds"))
    assert run.code == 1
    line = run.line("FAIL", "credential permissions")
    assert "site:site-b is not site site-a's: missing: publish $JS.ACK.KB_INTENTS.agent-site-a" in line
    assert "extra: publish $JS.ACK.KB_INTENTS.agent-site-b" in line
    assert "fix: mint a new .creds for site site-a (`kamaji-broker site add site-a`)" in line
    # ... and the server agrees: the probes on site-a's subjects are denied.
    probe = run.line("FAIL", "permission granted")
    assert "publish to $JS.API.CONSUMER.INFO.KB_INTENTS.agent-site-a denied by the server" in probe
    assert "subscribe to _INBOX_site-a.doctor denied by the server" in run.out
    direct = "$JS.API.DIRECT.GET.KB_INTENTS.kb.intent.site-a.doctor.doctor"
    denied = [line.split("\n")[0] for line in run.lines("FAIL", "permission granted")]
    assert f"FAIL permission granted publish to {direct} denied by the server" in denied
    assert run.line("SKIP", "consumer bound") == "SKIP consumer bound needs permission granted (FAIL)\n"


async def test_agent_missing_consumer(setup: Setup) -> None:
    run = await doctor("agent", *setup.agent(site="site-b"))
    assert run.code == 1
    line = run.line("FAIL", "consumer bound")
    assert "KB_INTENTS/agent-site-b does not exist" in line
    assert "fix: the hub creates it as soon as Site site-b exists (or its --sites names site-b)" in line
    assert "if it does, is the hub running? see its log" in line


async def test_agent_missing_crd(setup: Setup) -> None:
    async with admin(setup.kubeconfig) as kube:
        await kube.delete(ckube.resources.CUSTOM_RESOURCE_DEFINITION, "tenantcontrolplanes.kamaji.clastix.io")
    run = await doctor("agent", *setup.agent())
    assert run.code == 1
    line = run.line("FAIL", "crds installed")
    assert "not served: tenantcontrolplanes.kamaji.clastix.io" in line
    assert "fix: install Kamaji on this cluster" in line


async def test_agent_settings_error_names_the_flag(setup: Setup) -> None:
    flags = setup.agent()
    at = flags.index("--site")
    run = await doctor("agent", *flags[:at], *flags[at + 2 :])
    assert run.code == 2
    line = run.line("FAIL", "settings")
    assert "--site: required" in line and "fix: give --site (or KB_AGENT_SITE) a valid value" in line


async def test_agent_json(setup: Setup) -> None:
    run = await doctor("agent", *setup.agent(site="site-b"), "-o", "json")
    doc = json.loads(run.out)
    assert run.code == 1 and doc["ok"] is False
    failed = [c for c in doc["checks"] if c["outcome"] == "FAIL"]
    assert [c["check"] for c in failed] == ["consumer bound", "readyz answered"] and failed[0]["fix"]
    (heartbeat,) = [c for c in doc["checks"] if c["check"] == "heartbeat fresh"]
    assert (heartbeat["outcome"], heartbeat["detail"]) == ("SKIP", "needs consumer bound (FAIL)")
    (readyz,) = [c for c in doc["checks"] if c["check"] == "readyz answered"]
    url = f"http://127.0.0.1:{setup.health_port}/readyz"
    assert readyz["detail"] == f"nothing listens at {url}: the process is not running here", readyz


async def test_agent_missing_rbac_rule(setup: Setup, tmp_path: Path) -> None:
    """A token user (kube-apiserver's --token-auth-file) bound to a Role that lacks watch on Secrets."""
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("agent-token,agent,u1\n")
    server = kubeapi.Server(name="site", token_auth_file=tokens)
    await server.start(port=0)
    try:
        server.apply_crd_files(sorted(conftest.CRD_DIR.glob("*.yaml")))
        async with admin(server.write_kubeconfig(tmp_path / "admin")) as kube:
            await kube.create(ckube.resources.NAMESPACE, {"metadata": {"name": "tenants"}})
            rules = [
                {"apiGroups": ["kamaji.clastix.io"], "resources": ["tenantcontrolplanes"], "verbs": ["*"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]},  # no watch
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
            ]
            await kube.create(RBAC_ROLE, {"metadata": {"name": "agent"}, "rules": rules}, namespace="tenants")
            binding = {
                "metadata": {"name": "agent"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "agent"},
                "subjects": [{"kind": "User", "name": "agent"}],
            }
            await kube.create(RBAC_BINDING, binding, namespace="tenants")
        kubeconfig = server.write_kubeconfig(tmp_path / "agent", token="agent-token")
        run = await doctor("agent", *setup.agent(over={"--kubeconfig": str(kubeconfig)}))
    finally:
        await server.stop()
    assert run.code == 1
    line = run.line("FAIL", "rbac")
    assert "rbac 1 of 9 denied: (watch, core, secrets, namespace tenants)\n" in line
    assert (
        "fix: grant them in the agent chart's Role (deploy/charts/kamaji-broker-agent/templates/rbac.yaml"
        in line
    )
    run.line("PASS", "crds installed")


RBAC_ROLE = ckube.resources.Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
RBAC_BINDING = ckube.resources.Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")


async def test_agent_plaintext_nats_is_a_warning(setup: Setup, tmp_path: Path) -> None:
    plain = natsd.NatsServer(store_dir=tmp_path / "store", log_file=tmp_path / "nats.log")
    plain.start()
    try:
        async with contextlib.AsyncExitStack() as stack:
            hub = await bus.connect(helpers.options(plain.url), deadline=10)
            stack.push_async_callback(hub.close)
            await bus.ensure_topology(hub, sites=["site-a"], prefix=setup.prefix)
            flags = setup.agent(over={"--nats-url": plain.url})
            at = flags.index("--nats-ca-file")
            run = await doctor("agent", *flags[:at], *flags[at + 2 :])
    finally:
        plain.stop()
    # No agent runs here: only the checks of a running one fail.
    assert run.code == 1 and run.failed() == ["heartbeat fresh", "readyz answered"], run.out
    line = run.line("WARN", "tls verified")
    assert f"plaintext: {plain.url} without TLS" in line
    assert "fix: serve TLS (`kamaji-broker nats-config --tls-generate`) and give a tls:// --nats-url" in line


def hub_flags(setup: Setup, **over: str) -> list[str]:
    flags = {
        "--nats-url": setup.url,
        "--nats-creds": str(setup.conf / "hub.creds"),
        "--nats-ca-file": str(helpers.nats_tls().ca),
        "--kubeconfig": str(setup.kubeconfig),
        "--all-namespaces": "",
        "--sites": "site-a",
        "--signing-key": str(setup.keys / keyfiles.SIGNING_FILE),
        "--sealing-keys": str(setup.keys / keyfiles.SEALING_DIR),
        "--hub-public-keys": str(setup.keys / keyfiles.PUBLIC_FILE),
    }
    flags.update(over)
    return [x for flag, value in flags.items() if value != "-" for x in (flag, value) if x]


async def test_hub_healthy_then_operator_mode(setup: Setup) -> None:
    setup.cluster.apply_crd_files(sorted(DEPLOY_CRDS.glob("*.yaml")))
    run = await doctor("hub", *hub_flags(setup))
    assert run.code == 0, run.out + run.err
    assert run.out.endswith("13 PASS, 0 WARN, 0 FAIL, 1 SKIP\n"), run.out
    assert "exactly what the hub needs" in run.line("PASS", "credential permissions")
    assert run.line("SKIP", "permission not probed") == (
        "SKIP permission not probed would change state: publish kb.intent.*.*.*; "
        "publish $JS.API.> (beyond the two probed); subscribe kb.bootstrap.*; subscribe kb.renew.*; "
        "reply to requests\n"
    )
    assert run.line("PASS", "streams exist") == "PASS streams exist KB_INTENTS, KB_SITE_site-a\n"
    assert [line.split(" ", 3)[3] for line in run.lines("PASS", "permission granted")] == [
        "publish to $JS.API.INFO\n",
        "publish to $JS.API.STREAM.INFO.KB_INTENTS\n",
        "subscribe to _INBOX.doctor\n",
    ]
    operator_dir = str(setup.conf / operator.HUB_DIR)
    run = await doctor("hub", *hub_flags(setup, **{"--nats-creds": "-", "--nats-operator-dir": operator_dir}))
    assert run.code == 0, run.out + run.err
    assert f"minted from {operator_dir}" in run.line("PASS", "credential valid")
    assert f"as a hub user minted from --nats-operator-dir {operator_dir}" in run.line(
        "PASS", "nats reachable"
    )


async def test_hub_missing_crds_and_keys_that_do_not_match(setup: Setup, tmp_path: Path) -> None:
    keyfiles.generate(tmp_path / "other-keys")
    run = await doctor(
        "hub", *hub_flags(setup, **{"--hub-public-keys": str(tmp_path / "other-keys" / keyfiles.PUBLIC_FILE)})
    )
    assert run.code == 1
    line = run.line("FAIL", "crds installed")
    assert "not served: remotekamajicontrolplanes.controlplane.cluster.x-k8s.io, " in line
    assert "fix: install the CRDs: `kubectl apply -k deploy/crds`" in line
    keys_line = run.line("FAIL", "hub keys")
    assert "other-keys/hub-public-keys.json does not trust signing key" in keys_line
    assert "fix: publish the current" in keys_line


DEPLOY_CRDS = helpers.ROOT / "deploy" / "crds"


async def test_hub_operator_dir_that_does_not_load(setup: Setup, tmp_path: Path) -> None:
    (tmp_path / "hub").mkdir()
    over = {"--nats-creds": "-", "--nats-operator-dir": str(tmp_path / "hub")}
    setup.cluster.apply_crd_files(sorted(DEPLOY_CRDS.glob("*.yaml")))
    run = await doctor("hub", *hub_flags(setup, **over))
    assert run.code == 1
    line = run.line("FAIL", "credential valid")
    assert "hub: account.jwt is missing" in line
    assert (
        "fix: --nats-operator-dir" in line and "`kamaji-broker nats-config --auth operator` writes it" in line
    )
    assert run.line("SKIP", "nats reachable") == "SKIP nats reachable no usable NATS credential (see above)\n"


async def test_agent_static_seed_and_a_creds_file_that_is_not_one(
    static_nats: tuple[natsd.NatsServer, Path], cluster: kubeapi.Server, tmp_path: Path
) -> None:
    server, conf = static_nats
    hub = await bus.connect(helpers.options(server.url, seed_file=conf / "hub.nk"), deadline=10)
    await bus.ensure_topology(hub, sites=["site-a"])
    await hub.close()
    keyfiles.generate(tmp_path / "keys")
    setup = Setup(
        server.url,
        conf,
        subjects.DEFAULT_PREFIX,
        cluster.write_kubeconfig(tmp_path / "kc"),
        tmp_path / "keys",
        cluster,
        ports.free_port(),
    )
    flags = setup.agent(creds=conf / "sites" / "site-a.nk")
    at = flags.index("--nats-creds")
    flags[at] = "--nats-seed"
    run = await doctor("agent", *flags)
    assert run.code == 1 and run.failed() == ["heartbeat fresh", "readyz answered"], run.out  # no agent here
    assert f"static user (--nats-seed {conf / 'sites' / 'site-a.nk'}), no expiry" in run.line(
        "PASS", "credential valid"
    )
    run.line("PASS", "consumer bound")
    (tmp_path / "not.creds").write_text("not a creds file\n")
    run = await doctor("agent", *setup.agent(creds=tmp_path / "not.creds"))
    assert run.code == 1
    line = run.line("FAIL", "credential valid")
    assert f"--nats-creds {tmp_path / 'not.creds'}: not a JWT" in line


async def test_agent_kubernetes_unreachable(setup: Setup, tmp_path: Path) -> None:
    gone = kubeapi.Server(name="gone")
    await gone.start(port=0)
    kubeconfig = gone.write_kubeconfig(tmp_path / "gone")
    url = gone.url
    await gone.stop()
    run = await doctor("agent", *setup.agent(over={"--kubeconfig": str(kubeconfig)}))
    assert run.code == 1
    line = run.line("FAIL", "kubernetes reachable")
    assert f"--kubeconfig {kubeconfig}: " in line and url.removeprefix("http://") in line
    assert f"fix: check --kubeconfig {kubeconfig}: the server address and credentials" in line
    assert run.line("SKIP", "rbac") == "SKIP rbac needs kubernetes reachable (FAIL)\n"
    assert run.line("SKIP", "crds installed") == "SKIP crds installed needs kubernetes reachable (FAIL)\n"
    run.line("PASS", "consumer bound")  # NATS does not need Kubernetes with a .creds file


async def test_agent_expired_creds_file_is_refused_by_the_server(setup: Setup, tmp_path: Path) -> None:
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(hours=3)
    seed, token = minted(setup.conf, "site-a", now=long_ago, lifetime=dt.timedelta(hours=1))
    (tmp_path / "old.creds").write_text(natsjwt.creds(token, seed))
    run = await doctor("agent", *setup.agent(creds=tmp_path / "old.creds"))
    assert run.code == 1
    assert "JWT expired at" in run.line("FAIL", "credential valid")
    line = run.line("FAIL", "nats reachable")
    assert "auth: " in line and "Authorization Violation" in line
    assert f"fix: the server refused --nats-creds {tmp_path / 'old.creds'}" in line
    assert seed.decode() not in run.out + run.err and token not in run.out + run.err


CLUSTER_ROLE = ckube.resources.Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole")
CLUSTER_BINDING = ckube.resources.Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding"
)


async def test_hub_lease_denied_names_the_leader_election_role(setup: Setup, tmp_path: Path) -> None:
    """A token user with the hub's ClusterRole but not the leader-election Role: the fix names
    the Role (in --lease-namespace) that grants the Lease, not the ClusterRole."""
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("hub-token,hub,u1\n")
    server = kubeapi.Server(name="mgmt", token_auth_file=tokens)
    await server.start(port=0)
    try:
        server.apply_crd_files(sorted(DEPLOY_CRDS.glob("*.yaml")))
        rules = [
            {"apiGroups": [group], "resources": [resource], "verbs": list(verbs)}
            for group, resource, verbs in hub_rbac.RULES
            if resource != "leases"
        ]
        async with admin(server.write_kubeconfig(tmp_path / "admin")) as kube:
            await kube.create(CLUSTER_ROLE, {"metadata": {"name": "kamaji-broker-hub"}, "rules": rules})
            binding = {
                "metadata": {"name": "kamaji-broker-hub"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": "kamaji-broker-hub"},
                "subjects": [{"kind": "User", "name": "hub"}],
            }  # fmt: skip
            await kube.create(CLUSTER_BINDING, binding)
        kubeconfig = server.write_kubeconfig(tmp_path / "hub", token="hub-token")
        over = {"--kubeconfig": str(kubeconfig), "--leader-elect": "", "--lease-namespace": "kb-system"}
        run = await doctor("hub", *hub_flags(setup, **over))
    finally:
        await server.stop()
    assert run.code == 1, run.out
    line = run.line("FAIL", "rbac")
    assert "5 of " in line and "(get, coordination.k8s.io, leases, namespace kb-system)" in line
    assert "fix: grant the Lease in the Role kamaji-broker-hub-leader-election in namespace kb-system" in line
    assert "ClusterRole" not in line
