"""common.bus.identity: in-memory JWT identities, and ``bus.connect`` with them on a real
nats-server in operator mode."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from common import bus
from common.bus import errors as bus_errors
from common.bus import identity as natsidentity
from common.files import operator
from protocol import credentials, natsjwt
from sandbox import natsd
from tests import helpers

T0 = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)


def _minter(conf: Path, site: str = "site-a") -> tuple[operator.Keys, natsjwt.Claims, bytes]:
    keys = operator.Keys.load_or_create(conf)
    seed = natsjwt.new_seed("user")
    now = dt.datetime.now(dt.UTC)
    return (
        keys,
        credentials.site_user(site, natsjwt.public_of(seed), account=keys.account_public, now=now),
        seed,
    )


def _options(server: natsd.NatsServer, identity: bus.Identity, inbox: str = "_INBOX_site-a") -> bus.Options:
    base = helpers.options(server.url, inbox_prefix=inbox)
    return bus.Options(
        servers=base.servers,
        identity=identity,
        inbox_prefix=inbox,
        request_timeout=base.request_timeout,
        reconnect_wait=base.reconnect_wait,
        ca_file=base.ca_file,
    )


async def test_a_held_identity_connects_and_is_the_site(operator_nats: tuple[natsd.NatsServer, Path]) -> None:
    server, conf = operator_nats
    keys, claims, seed = _minter(conf)
    held = natsidentity.Held(seed, natsjwt.encode(claims, natsjwt.key_pair(keys.account_signing)))
    conn = await bus.connect(_options(server, held), deadline=10)
    try:
        with pytest.raises(bus_errors.PermissionDenied, match=r"kb\.status\.site-b"):
            await conn.subscribe("kb.status.site-b.ns.cp", lambda _m: _noop())
    finally:
        await conn.close()


async def _noop() -> None:
    return None


async def test_a_held_identity_with_another_seed_is_refused(
    operator_nats: tuple[natsd.NatsServer, Path],
) -> None:
    """The JWT is public: without the seed it was minted for, nobody gets in with it."""
    server, conf = operator_nats
    keys, claims, _seed = _minter(conf)
    token = natsjwt.encode(claims, natsjwt.key_pair(keys.account_signing))

    class Thief:
        def jwt(self) -> str:
            return token

        def sign(self, nonce: bytes) -> bytes:
            return bytes(natsjwt.key_pair(natsjwt.new_seed("user")).sign(nonce))

    with pytest.raises(bus_errors.Unavailable, match=r"(?i)authorization violation"):
        await bus.connect(_options(server, Thief()), deadline=2)


def test_held_refuses_a_jwt_for_another_key_and_never_shows_its_seed() -> None:
    account = natsjwt.new_seed("account")
    seed, other = natsjwt.new_seed("user"), natsjwt.new_seed("user")
    mine = credentials.site_user("site-a", natsjwt.public_of(seed), account="A", now=T0)
    theirs = credentials.site_user("site-a", natsjwt.public_of(other), account="A", now=T0)
    held = natsidentity.Held(seed, natsjwt.encode(mine, natsjwt.key_pair(account)))
    assert held.expires_at == T0 + credentials.DEFAULT_LIFETIME
    with pytest.raises(ValueError, match="not for this identity's key"):
        held.replace(natsjwt.encode(theirs, natsjwt.key_pair(account)))
    assert seed.decode() not in repr(held) and held.public_key in repr(held)


def test_self_minted_mints_again_after_half_its_lifetime() -> None:
    account = natsjwt.new_seed("account")
    now = [T0]
    minted: list[dt.datetime] = []

    def mint(public_key: str, at: dt.datetime) -> str:
        minted.append(at)
        claims = credentials.hub_user(public_key, account="A", now=at, lifetime=dt.timedelta(hours=2))
        return natsjwt.encode(claims, natsjwt.key_pair(account))

    identity = natsidentity.SelfMinted(mint, clock=lambda: now[0])
    first = identity.jwt()
    now[0] = T0 + dt.timedelta(minutes=59)
    assert identity.jwt() == first and minted == [T0]
    now[0] = T0 + dt.timedelta(hours=1)
    assert identity.jwt() != first and minted == [T0, now[0]]
    assert identity.expires_at == now[0] + dt.timedelta(hours=2)
