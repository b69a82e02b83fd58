"""agent.credential.keeper against a real nats-server in operator mode and the emulated site cluster:
bootstrap like a CSR, reuse of the identity Secret, refusals in /readyz, in-band renewal across
the server's expiry disconnect, with the hub's real credential service (``tests.agent.hub_credentials``)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent import metrics as agent_metrics
from agent.credential import keeper, state
from agent.settings import AgentSettings
from common import bus, health
from common import kube as ckube
from common.bus import errors as bus_errors
from common.bus import identity
from common.files import keys
from common.kube import resources
from hub.api import crds
from protocol import credentials, natsjwt, subjects
from sandbox import kubeapi, natsd
from tests import helpers
from tests.agent import hub_credentials

CRDS = Path(__file__).resolve().parents[3] / "deploy" / "crds"

NAMESPACE = "kamaji-broker-system"
SECRET = "kamaji-broker-agent-identity"


@pytest.fixture
async def site_kube(kube: ckube.Kube) -> ckube.Kube:
    await kube.create(resources.NAMESPACE, {"metadata": {"name": NAMESPACE}})
    return kube


@pytest.fixture
async def hub(
    operator_nats: tuple[natsd.NatsServer, Path], cluster: kubeapi.Server, kube: ckube.Kube
) -> AsyncIterator[hub_credentials.Responder]:
    server, conf = operator_nats
    cluster.apply_crd_files([CRDS / crds.SITE_FILENAME])  # it plays the management cluster too
    responder = await hub_credentials.responder(server.url, conf, kube)
    yield responder
    await responder.close()


def settings(server: natsd.NatsServer, bootstrap: Path | None, **fields: Any) -> AgentSettings:
    here = Path(__file__)
    return AgentSettings(
        site="site-a",
        nats_url=server.url,
        nats_ca_file=helpers.ca_for(server.url),
        nats_identity_secret=f"{NAMESPACE}/{SECRET}",
        nats_bootstrap_creds=bootstrap,
        hub_public_keys=here,
        in_cluster=True,
        all_namespaces=True,
        **fields,
    )


def make(s: AgentSettings, kube: ckube.Kube) -> keeper.Credential:
    return keeper.Credential(s, kube=kube, readiness=health.Readiness(), metrics=agent_metrics.Metrics())


async def stored(kube: ckube.Kube) -> state.Stored:
    return state.read(await kube.get(resources.SECRET, SECRET, namespace=NAMESPACE))


async def connect(s: AgentSettings, held: identity.Held) -> bus.Connection:
    options = helpers.options(s.nats_url, inbox_prefix=bus.site_inbox_prefix("site-a"))
    return await bus.connect(dataclasses.replace(options, identity=held), deadline=10)


def expiry_metric(cred: keeper.Credential) -> float | None:
    return cred.metrics.registry.get_sample_value("kb_agent_nats_credential_expiry_timestamp_seconds")


async def ask_own_renewal(conn: bus.Connection, seed: bytes, held: identity.Held) -> credentials.Reply:
    """A renewal request of the test's own on ``conn``: what only site-a's identity may send."""
    own = credentials.request(credentials.Kind.RENEW, "site-a", seed, credential=held.jwt())
    data = await conn.request(subjects.service(credentials.Kind.RENEW, "site-a"), msgspec.json.encode(own))
    return msgspec.json.decode(data, type=credentials.Reply)


async def granted(hub: hub_credentials.Responder, kinds: list[credentials.Kind]) -> None:
    """The hub counts a grant once its answer has reached the server (its answer syncs), so the
    agent may hold the answer a moment before the count moves."""
    await helpers.eventually(hub.kinds, lambda k: k == kinds, what=f"the grants {kinds}")


async def test_first_start_bootstraps_keeps_seed_and_jwt_and_works_as_the_site(
    operator_nats: tuple[natsd.NatsServer, Path],
    hub: hub_credentials.Responder,
    site_kube: ckube.Kube,
    tmp_path: Path,
) -> None:
    server, conf = operator_nats
    s = settings(server, hub_credentials.bootstrap_creds(conf, tmp_path / "bootstrap.creds"))
    cred = make(s, site_kube)
    held = await cred.obtain()
    kept = await stored(site_kube)
    assert kept.seed is not None and kept.jwt == held.jwt()
    assert natsjwt.decode(held.jwt()).sub == natsjwt.public_of(kept.seed) == held.public_key
    await granted(hub, [credentials.Kind.BOOTSTRAP])
    assert await hub.site_key() == held.public_key
    assert cred.readiness.checks[keeper.CHECK][0] is True
    expiry = natsjwt.decode(held.jwt()).exp
    assert expiry_metric(cred) == expiry
    conn = await connect(s, held)
    try:
        # As site-a: its own renew subject is answered, site-b's is refused by the server.
        reply = await ask_own_renewal(conn, kept.seed, held)
        assert reply.jwt and not reply.error
        request = credentials.request(credentials.Kind.RENEW, "site-b", kept.seed, credential=held.jwt())
        with pytest.raises(bus_errors.PermissionDenied, match="site-b"):
            await conn.request(
                subjects.service(credentials.Kind.RENEW, "site-b"), msgspec.json.encode(request)
            )
    finally:
        await conn.close()


async def test_a_restart_reuses_the_secret_without_a_bootstrap(
    operator_nats: tuple[natsd.NatsServer, Path],
    hub: hub_credentials.Responder,
    site_kube: ckube.Kube,
    tmp_path: Path,
) -> None:
    server, conf = operator_nats
    bootstrap = hub_credentials.bootstrap_creds(conf, tmp_path / "bootstrap.creds")
    first = await make(settings(server, bootstrap), site_kube).obtain()
    bootstrap.unlink()  # single use: the operator may remove it once the site joined
    again = await make(settings(server, bootstrap), site_kube).obtain()
    assert again.public_key == first.public_key and again.jwt() == first.jwt()
    await granted(hub, [credentials.Kind.BOOTSTRAP])
    conn = await connect(settings(server, None), again)
    assert conn.connected
    await conn.close()


@pytest.mark.parametrize("failure", ["refused", "no responder", "expired bootstrap", "no bootstrap file"])
async def test_a_failed_bootstrap_is_in_readyz_and_retried_until_granted(
    failure: str,
    operator_nats: tuple[natsd.NatsServer, Path],
    hub: hub_credentials.Responder,
    site_kube: ckube.Kube,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each failure is named in /readyz while the agent keeps trying; once the hub answers again
    (or the operator hands over a fresh bootstrap .creds, read at every attempt) it joins."""
    caplog.set_level(logging.DEBUG)
    server, conf = operator_nats
    path = tmp_path / "b.creds"
    expected = {
        "refused": "the hub refused: no Site 'site-a' in the management cluster",
        "no responder": "no responders",
        "expired bootstrap": "expired at",
        "no bootstrap file": "No such file or directory",
    }[failure]
    if failure == "refused":
        await hub.remove_site()
    elif failure == "no responder":
        await hub.stop()
    if failure == "expired bootstrap":
        hub_credentials.bootstrap_creds(conf, path, age=dt.timedelta(hours=2))
    elif failure != "no bootstrap file":
        hub_credentials.bootstrap_creds(conf, path)
    cred = make(settings(server, path), site_kube)
    obtaining = asyncio.ensure_future(cred.obtain())
    try:
        reason = await helpers.eventually(
            lambda: cred.readiness.checks.get(keeper.CHECK, (True, ""))[1],
            lambda r: expected.lower() in r.lower(),
            within=30,
            what="the failure in /readyz",
        )
        assert not cred.readiness.ready and reason.startswith("bootstrap failed: ")
        assert not obtaining.done()
        if failure == "refused":
            await hub.add_site()
            # The Site's new life refuses a bootstrap made before it (made in its first second,
            # it would pass): the operator hands over one of this life, as `site add` would.
            hub_credentials.bootstrap_creds(conf, path)
        if failure == "no responder":
            await hub.start()
        if failure in ("expired bootstrap", "no bootstrap file"):
            hub_credentials.bootstrap_creds(conf, path)
        held = await asyncio.wait_for(obtaining, 60)
    finally:
        obtaining.cancel()
    assert cred.readiness.ready
    await granted(hub, [credentials.Kind.BOOTSTRAP])
    seed = (await stored(site_kube)).seed
    assert seed is not None and held.public_key == natsjwt.public_of(seed)
    for text in (
        caplog.text,
        cred.readiness.report(),
        prometheus_client.generate_latest(cred.metrics.registry).decode(),
    ):
        assert seed.decode() not in text and seed.decode()[:20] not in text


async def test_renewal_replaces_the_jwt_before_expiry_and_the_connection_outlives_it(
    operator_nats: tuple[natsd.NatsServer, Path],
    hub: hub_credentials.Responder,
    site_kube: ckube.Kube,
    tmp_path: Path,
) -> None:
    server, conf = operator_nats
    hub.lifetime = dt.timedelta(seconds=6)
    s = settings(server, hub_credentials.bootstrap_creds(conf, tmp_path / "b.creds"))
    cred = make(s, site_kube)
    held = await cred.obtain()
    first = held.jwt()
    first_exp = natsjwt.decode(first).exp
    conn = await connect(s, held)
    renewing = asyncio.ensure_future(cred.renew_forever(conn))
    try:
        await helpers.eventually(held.jwt, lambda jwt: jwt != first, within=15, what="a renewed JWT")
        await helpers.eventually(hub.kinds, lambda k: credentials.Kind.RENEW in k, what="the renewal counted")
        assert natsjwt.decode(held.jwt()).exp > first_exp
        # The renewed JWT takes over at once (a reconnect), not at the server's expiry disconnect
        # (nats-py would close for good there); past the first JWT's expiry it still works.
        await helpers.eventually(lambda: conn.reconnects, lambda n: n >= 1, within=15, what="a reconnect")
        await helpers.eventually(
            time.time, lambda now: now > first_exp + 1, within=15, what="the first expiry"
        )
        await helpers.eventually(lambda: conn.connected, within=10, what="connected after the first expiry")
        kept = await helpers.eventually(
            lambda: stored(site_kube), lambda k: k.jwt == held.jwt(), what="the Secret holding the new JWT"
        )
        assert kept.seed is not None and natsjwt.public_of(kept.seed) == held.public_key
        assert not (await ask_own_renewal(conn, kept.seed, held)).error
        assert (expiry_metric(cred) or 0) > first_exp
        assert cred.readiness.checks[keeper.CHECK][0] is True
    finally:
        renewing.cancel()
        await asyncio.gather(renewing, return_exceptions=True)
        await conn.close()


async def test_the_agent_process_in_operator_mode_joins_with_its_own_key(
    operator_nats: tuple[natsd.NatsServer, Path],
    hub: hub_credentials.Responder,
    cluster: kubeapi.Server,
    site_kube: ckube.Kube,
    tmp_path: Path,
) -> None:
    """`kamaji-broker agent --nats-identity-secret --nats-bootstrap-creds`: agent.main's wiring
    bootstraps, connects as the site (its consumer binds: /readyz is 200 with the credential
    check), shows the expiry, and never writes its seed to the log."""
    server, conf = operator_nats
    topology = await bus.connect(helpers.options(server.url, seed_file=conf / "hub.creds"), deadline=10)
    await bus.ensure_topology(topology, sites=["site-a"])
    await topology.close()
    keys.generate(tmp_path / "keys")
    kubeconfig = cluster.write_kubeconfig(tmp_path / "site.kubeconfig")
    bootstrap = hub_credentials.bootstrap_creds(conf, tmp_path / "bootstrap.creds")
    args = [
        "--site", "site-a", "--nats-url", server.url,
        "--nats-identity-secret", f"{NAMESPACE}/{SECRET}", "--nats-bootstrap-creds", str(bootstrap),
        "--hub-public-keys", str(tmp_path / "keys" / "hub-public-keys.json"),
        "--kubeconfig", str(kubeconfig), "--all-namespaces",
    ]  # fmt: skip
    proc = helpers.CliProcess("agent", args, log=tmp_path / "agent.log")
    try:
        text = await proc.readyz(lambda status, _: status == 200)
        assert "[+] nats-credential: JWT valid until" in text and "[+] consumer" in text
        kept = await stored(site_kube)
        assert kept.seed is not None and kept.jwt is not None
        _, metrics = await proc.get("/metrics")
        expiry = natsjwt.decode(kept.jwt).exp
        samples = {
            sample.name: sample.value
            for family in text_string_to_metric_families(metrics)
            for sample in family.samples
        }
        assert samples["kb_agent_nats_credential_expiry_timestamp_seconds"] == expiry
        await granted(hub, [credentials.Kind.BOOTSTRAP])
    finally:
        assert await asyncio.to_thread(proc.stop) == 0
    assert kept.seed.decode() not in proc.log.read_text()
    assert "bootstrapped: the hub minted a JWT" in proc.log.read_text()


async def test_renewals_failing_while_the_hub_is_down_show_in_readyz_as_the_expiry_nears(
    operator_nats: tuple[natsd.NatsServer, Path],
    hub: hub_credentials.Responder,
    site_kube: ckube.Kube,
    tmp_path: Path,
) -> None:
    """The site keeps working on its JWT while the hub cannot renew it, and /readyz turns not
    ready, naming why renewal fails, once less than a tenth of the lifetime is left."""
    server, conf = operator_nats
    hub.lifetime = dt.timedelta(seconds=8)
    s = settings(server, hub_credentials.bootstrap_creds(conf, tmp_path / "b.creds"))
    cred = make(s, site_kube)
    held = await cred.obtain()
    first = held.jwt()
    # Counted once its answer has reached the server: stopping the hub first could cut that short.
    await granted(hub, [credentials.Kind.BOOTSTRAP])
    await hub.stop()  # the hub is down: nobody answers on kb.renew.site-a
    conn = await connect(s, held)
    renewing = asyncio.ensure_future(cred.renew_forever(conn))
    try:
        check = await helpers.eventually(
            lambda: cred.readiness.checks[keeper.CHECK],
            lambda c: "renewal failing" in c[1],
            within=15,
            what="a failing renewal in /readyz",
        )
        assert "no responders" in check[1]
        if check[0]:  # still ready while more than a tenth is left
            assert "JWT valid until" in check[1]
        check = await helpers.eventually(
            lambda: cred.readiness.checks[keeper.CHECK],
            lambda c: not c[0],
            within=15,
            what="not ready as the expiry nears",
        )
        assert ("expiring soon" in check[1] or "expired at" in check[1]) and "no responders" in check[1]
        assert held.jwt() == first
        assert hub.kinds() == [credentials.Kind.BOOTSTRAP]  # no renewal granted meanwhile
        assert cred.held is held
    finally:
        renewing.cancel()
        await asyncio.gather(renewing, return_exceptions=True)
        await conn.close()
