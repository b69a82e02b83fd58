"""Operator mode against a real nats-server: only the JWTs the hub mints get in, a
revoked site is thrown out at once and stays out across a restart of the server.

The grants of every identity are the attack suite's (test_grants.py, test_nats_attacks.py), which
runs in both modes. Here: who the server lets connect at all.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from common import bus
from common.bus import errors as bus_errors
from common.files import natsserver, operator
from hub.credentials import revocation
from protocol import credentials, natsjwt
from sandbox import natsd
from tests import conftest, helpers
from tests.security import nats_support as ns


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[natsd.NatsServer, Path]]:
    """A server of the test's own (a revocation changes it for good)."""
    srv, conf = conftest.operator_mode_server(tmp_path)
    srv.start()
    yield srv, conf
    srv.stop()


def _authority(conf: Path) -> revocation.Authority:
    keys = operator.Keys.load_or_create(conf)
    return revocation.Authority(
        account=keys.account_public,
        account_signing=keys.account_signing,
        operator_signing=keys.operator_signing,
    )


def _creds(path: Path, claims: natsjwt.Claims, seed: bytes, signer: bytes) -> Path:
    path.write_text(natsjwt.creds(natsjwt.encode(claims, natsjwt.key_pair(signer)), seed))
    return path


async def _refused(srv: natsd.NatsServer, creds: Path) -> str:
    """Connect with ``creds``: the server's refusal, lower-cased (fails if it lets us in)."""
    return await ns.refusal(srv, user_credentials=str(creds))


async def _site_claims(conf: Path, site: str, **kw: object) -> tuple[natsjwt.Claims, bytes]:
    keys = operator.Keys.load_or_create(conf)
    seed = natsjwt.new_seed("user")
    now = kw.pop("now", dt.datetime.now(dt.UTC))
    claims = credentials.site_user(site, natsjwt.public_of(seed), account=keys.account_public, now=now)  # type: ignore[arg-type]
    return claims, seed


async def test_a_site_jwt_minted_with_the_accounts_signing_key_gets_in(
    server: tuple[natsd.NatsServer, Path],
) -> None:
    srv, conf = server
    raw = await ns.connect_site(srv, conf, "site-a")
    await ns.alive(srv, raw)
    await raw.close()


async def test_an_expired_jwt_is_refused_without_the_hub(
    server: tuple[natsd.NatsServer, Path], tmp_path: Path
) -> None:
    srv, conf = server
    keys = operator.Keys.load_or_create(conf)
    claims, seed = await _site_claims(conf, "site-a", now=dt.datetime.now(dt.UTC) - dt.timedelta(hours=25))
    assert claims.exp < time.time()
    assert "authorization violation" in await _refused(
        srv, _creds(tmp_path / "old.creds", claims, seed, keys.account_signing)
    )


@pytest.mark.parametrize("signer", ["own-user-key", "stranger-account", "stranger-as-issuer-account"])
async def test_a_jwt_the_site_signs_itself_is_refused(
    server: tuple[natsd.NatsServer, Path], tmp_path: Path, signer: str
) -> None:
    """A site holds only its user seed: whatever it signs, with that or with an account key of
    its own making, claiming every grant, the server does not trust."""
    srv, conf = server
    keys = operator.Keys.load_or_create(conf)
    seed, stranger = natsjwt.new_seed("user"), natsjwt.new_seed("account")
    issuer_account = (
        natsjwt.public_of(stranger) if signer == "stranger-as-issuer-account" else keys.account_public
    )
    everything = natsjwt.Claims(
        sub=natsjwt.public_of(seed),
        iss="",
        iat=0,
        name="site:site-a",
        nats=natsjwt.User(
            pub=natsjwt.Allow((">",)), sub=natsjwt.Allow((">",)), issuer_account=issuer_account
        ),
    )
    key = seed if signer == "own-user-key" else stranger
    forged = _creds(tmp_path / "forged.creds", everything, seed, key)
    assert "authorization violation" in await _refused(srv, forged)


async def test_a_tampered_jwt_asking_for_more_is_refused(
    server: tuple[natsd.NatsServer, Path], tmp_path: Path
) -> None:
    """The site's real JWT with its grants widened: the signature no longer matches."""
    srv, conf = server
    keys = operator.Keys.load_or_create(conf)
    claims, seed = await _site_claims(conf, "site-a")
    token = natsjwt.encode(claims, natsjwt.key_pair(keys.account_signing))
    wider = natsjwt.encode(
        natsjwt.Claims(
            sub=claims.sub,
            iss="",
            iat=0,
            name=claims.name,
            nats=natsjwt.User(
                pub=natsjwt.Allow((">",)), sub=natsjwt.Allow((">",)), issuer_account=keys.account_public
            ),
        ),
        natsjwt.key_pair(keys.account_signing),
    )
    spliced = ".".join((token.split(".")[0], wider.split(".")[1], token.split(".")[2]))
    (tmp_path / "spliced.creds").write_text(natsjwt.creds(spliced, seed))
    assert "authorization violation" in await _refused(srv, tmp_path / "spliced.creds")


async def test_a_jwt_without_its_seed_is_refused(server: tuple[natsd.NatsServer, Path]) -> None:
    """The account disallows bearer tokens: a stolen JWT alone (it is not secret) is worthless."""
    srv, conf = server
    keys = operator.Keys.load_or_create(conf)
    claims, _seed = await _site_claims(conf, "site-a")
    token = natsjwt.encode(claims, natsjwt.key_pair(keys.account_signing))
    other = natsjwt.key_pair(natsjwt.new_seed("user"))
    refused = await ns.refusal(
        srv,
        user_jwt_cb=lambda: token.encode(),
        signature_cb=lambda nonce: base64.b64encode(other.sign(nonce.encode())),
    )
    assert "authorization violation" in refused


async def test_revocation_disconnects_the_site_at_once_and_survives_a_restart(
    server: tuple[natsd.NatsServer, Path],
) -> None:
    srv, conf = server
    authority = _authority(conf)
    site_a = await ns.connect_site(srv, conf, "site-a")
    site_b = await ns.connect_site(srv, conf, "site-b")
    system = await bus.connect(
        helpers.options(srv.url, seed_file=conf / operator.HUB_SYSTEM_CREDS), deadline=10
    )
    a_key = natsjwt.decode(helpers.creds_jwt(helpers.identity_file(conf, "sites/site-a"))).sub
    try:
        now = dt.datetime.now(dt.UTC)
        held = await revocation.revoke(system, authority, {a_key: int(now.timestamp())}, now=now)
        assert held == {a_key: int(now.timestamp())}
        await helpers.eventually(lambda: not site_a.nc.is_connected, within=5, what="site-a disconnected")
        assert site_b.nc.is_connected
        await ns.alive(srv, site_b)
        assert "authorization violation" in await _refused(srv, helpers.identity_file(conf, "sites/site-a"))
        await site_b.close()
        await system.close()
        srv.restart()  # a full outage: the resolver's directory keeps the revocation
        assert "authorization violation" in await _refused(srv, helpers.identity_file(conf, "sites/site-a"))
        back = await ns.connect_site(srv, conf, "site-b")
        await ns.alive(srv, back)
        await back.close()
    finally:
        await site_a.nc.close()
        await system.close()


async def test_revocations_accumulate_and_old_ones_are_pruned(server: tuple[natsd.NatsServer, Path]) -> None:
    srv, conf = server
    authority = _authority(conf)
    system = await bus.connect(
        helpers.options(srv.url, seed_file=conf / operator.HUB_SYSTEM_CREDS), deadline=10
    )
    try:
        now = dt.datetime.now(dt.UTC)
        old = int((now - credentials.DEFAULT_LIFETIME - dt.timedelta(hours=1)).timestamp())
        gone, kept = (natsjwt.public_of(natsjwt.new_seed("user")) for _ in range(2))
        await revocation.revoke(system, authority, {gone: old}, now=now)
        await revocation.revoke(system, authority, {kept: int(now.timestamp())}, now=now)
        assert await revocation.held_revocations(system, authority.account) == {kept: int(now.timestamp())}
    finally:
        await system.close()


def test_merged_keeps_the_later_time_and_drops_what_has_expired() -> None:
    now = dt.datetime(2026, 12, 2, tzinfo=dt.UTC)
    t = int(now.timestamp())
    day = dt.timedelta(hours=24)
    assert revocation.merged(
        {"A": t - 10, "OLD": t - 86_401}, {"A": t - 20, "B": t}, now=now, keep_for=day
    ) == {
        "A": t - 10,
        "B": t,
    }


async def test_the_hubs_system_user_cannot_do_anything_else(server: tuple[natsd.NatsServer, Path]) -> None:
    srv, conf = server
    system = await ns.connect(srv, conf / operator.HUB_SYSTEM_CREDS)
    try:
        for subject in (
            "$SYS.REQ.SERVER.PING",
            "kb.intent.site-a.ns.cp",
            "$SYS.REQ.ACCOUNT.AX.CLAIMS.LOOKUP",
        ):
            await system.publish(subject, b"{}")
            await system.denied("publish", subject)
    finally:
        await system.close()


async def test_concurrent_revocations_are_all_kept(server: tuple[natsd.NatsServer, Path]) -> None:
    """Two revocations at once (a Site deleted while another site bootstraps): neither push may
    drop the other's entry."""
    srv, conf = server
    system = await bus.connect(
        helpers.options(srv.url, seed_file=conf / operator.HUB_SYSTEM_CREDS), deadline=10
    )
    revoker = revocation.Revoker(system, _authority(conf))
    keys = [natsjwt.public_of(natsjwt.new_seed("user")) for _ in range(4)]
    try:
        now = dt.datetime.now(dt.UTC)
        await asyncio.gather(*(revoker.revoke({k: int(now.timestamp())}, now=now) for k in keys))
        assert set(await revocation.held_revocations(system, _authority(conf).account)) == set(keys)
    finally:
        await system.close()


async def test_a_node_restored_from_the_preload_gets_the_revocations_back(
    server: tuple[natsd.NatsServer, Path],
) -> None:
    """A server whose resolver directory was lost starts from the preload, without any
    revocation: the hub's next account sync pushes them again, and the revoked site stays out."""
    srv, conf = server
    a_creds = helpers.identity_file(conf, "sites/site-a")
    a_key = natsjwt.decode(helpers.creds_jwt(a_creds)).sub
    system = await bus.connect(
        helpers.options(srv.url, seed_file=conf / operator.HUB_SYSTEM_CREDS), deadline=10
    )
    revoker = revocation.Revoker(system, _authority(conf))
    try:
        await revoker.revoke({a_key: int(time.time())}, now=dt.datetime.now(dt.UTC))
        srv.stop()
        shutil.rmtree(srv.store_dir / natsserver.RESOLVER_DIR)
        srv.start()
        held = await helpers.eventually(
            lambda: _held(system, revoker.authority.account), lambda h: h is not None, what="an answer"
        )
        assert held is not None and a_key not in held
        assert await revoker.sync(now=dt.datetime.now(dt.UTC)) is True
        assert a_key in await revocation.held_revocations(system, revoker.authority.account)
        assert "authorization violation" in await _refused(srv, a_creds)
    finally:
        await system.close()


async def _held(system: bus.Connection, account: str) -> dict[str, int] | None:
    """The resolver's revocations, or None while the restarted server does not answer yet."""
    try:
        return await revocation.held_revocations(system, account)
    except bus_errors.BusError:
        return None


async def test_a_revocation_that_cannot_be_pushed_stays_pending_until_the_next_sync(
    server: tuple[natsd.NatsServer, Path],
) -> None:
    srv, conf = server
    system = await bus.connect(
        helpers.options(srv.url, seed_file=conf / operator.HUB_SYSTEM_CREDS), deadline=10
    )
    revoker = revocation.Revoker(system, _authority(conf))
    key = natsjwt.public_of(natsjwt.new_seed("user"))
    try:
        srv.stop()
        with pytest.raises(bus_errors.BusError):
            await revoker.revoke({key: int(time.time())}, now=dt.datetime.now(dt.UTC))
        assert key in revoker.pending
        srv.start()
        await helpers.eventually(lambda: _held(system, revoker.authority.account), lambda h: h is not None)
        assert await revoker.sync(now=dt.datetime.now(dt.UTC)) is True
        assert key in await revocation.held_revocations(system, revoker.authority.account)
        assert revoker.pending == {}
    finally:
        await system.close()
