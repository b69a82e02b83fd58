"""The hub's credential service under attack: bootstrap like a CSR, renewal in band,
and every way a site or a holder of a bootstrap credential could try to get more.

Real nats-server in operator mode, real management-cluster emulator, ``hub.credentials.service``
as the hub runs it (``credential_support``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import nats.errors
import pytest

from common.kube import resources
from protocol import credentials, natsjwt
from tests import helpers
from tests.security import credential_support as cs
from tests.security import nats_support as ns

B, R = credentials.Kind.BOOTSTRAP, credentials.Kind.RENEW


@pytest.fixture
async def w(tmp_path: Path) -> AsyncIterator[cs.World]:
    async with cs.world(tmp_path) as world:
        await world.add_site("site-a")
        await world.add_site("site-b")
        yield world


async def _bootstrap(w: cs.World, site: str = "site-a") -> tuple[bytes, str, ns.Raw, Path]:
    """A fresh agent key bootstrapped: (seed, its JWT, the bootstrap connection, the creds)."""
    creds = w.bootstrap_creds(site)
    raw = await w.asker(creds, site)
    seed = natsjwt.new_seed("user")
    reply = await cs.ask(raw, B, site, seed, credential=helpers.creds_jwt(creds))
    assert reply.jwt, reply.error
    return seed, reply.jwt, raw, creds


async def _refused_at_connect(w: cs.World, creds: Path, site: str) -> None:
    with pytest.raises(nats.errors.Error, match=r"(?i)authorization violation"):
        await w.asker(creds, site)


async def test_bootstrap_mints_for_the_askers_own_key_records_it_and_is_single_use(w: cs.World) -> None:
    seed, token, raw, creds = await _bootstrap(w)
    claims = natsjwt.decode(token)
    assert claims.sub == natsjwt.public_of(seed) and claims.name == "site:site-a"
    assert claims.exp - claims.iat == int(credentials.DEFAULT_LIFETIME.total_seconds())
    assert (await w.record("site-a")).key == claims.sub
    # the bootstrap credential is revoked once used: its connection is closed, it cannot come back
    await helpers.eventually(lambda: not raw.nc.is_connected, what="bootstrap connection closed")
    await _refused_at_connect(w, creds, "site-a")
    # and the new credential works, as site-a
    site = await w.asker(_creds(w, token, seed), "site-a")
    await site.publish("kb.status.site-b.ns.cp", b"{}")
    await site.denied("publish", "kb.status.site-b.ns.cp")
    await site.close()
    await helpers.eventually(lambda: w.counted("bootstrap", "granted") >= 1, what="the bootstrap counted")


def _creds(w: cs.World, token: str, seed: bytes) -> Path:
    path = w.work / f"agent-{natsjwt.public_of(seed)[:8]}.creds"
    path.write_text(natsjwt.creds(token, seed))
    return path


async def test_a_second_request_on_the_same_bootstrap_connection_is_refused(w: cs.World) -> None:
    """Even before the revocation reaches the server: the hub remembers the bootstrap it used."""
    creds = w.bootstrap_creds("site-a")
    raw = await w.asker(creds, "site-a")
    first, second = natsjwt.new_seed("user"), natsjwt.new_seed("user")
    jwt = helpers.creds_jwt(creds)
    req1 = msgspec.json.encode(credentials.request(B, "site-a", first, credential=jwt))
    req2 = msgspec.json.encode(credentials.request(B, "site-a", second, credential=jwt))
    inbox1, inbox2 = raw.inbox(), raw.inbox()
    await raw.listen(inbox1)
    await raw.listen(inbox2)
    await raw.nc.publish("kb.bootstrap.site-a", req1, reply=inbox1)
    await raw.nc.publish("kb.bootstrap.site-a", req2, reply=inbox2)
    await raw.nc.flush()
    replies = await helpers.eventually(lambda: list(raw.received), lambda r: len(r) >= 1, what="an answer")
    granted = [msgspec.json.decode(m.data, type=credentials.Reply) for m in replies]
    assert granted[0].jwt and natsjwt.decode(granted[0].jwt).sub == natsjwt.public_of(first)
    # the second got a refusal, or nothing at all because the revocation closed the connection first
    for reply in granted[1:]:
        assert not reply.jwt and "single-use" in reply.error
    assert (await w.record("site-a")).key == natsjwt.public_of(first)


async def test_bootstrap_naming_another_site(w: cs.World) -> None:
    creds = w.bootstrap_creds("site-a")
    raw = await w.asker(creds, "site-a")
    seed = natsjwt.new_seed("user")
    # on site-b's subject: the server refuses the publish
    await raw.publish("kb.bootstrap.site-b", b"{}", reply=raw.inbox())
    await raw.denied("publish", "kb.bootstrap.site-b")
    # on its own subject, naming site-b in the body: the hub refuses
    reply = await cs.ask(raw, B, "site-b", seed, credential=helpers.creds_jwt(creds), subject_site="site-a")
    assert "request for site 'site-b' on site 'site-a''s subject" in reply.error
    assert (await w.record("site-b")).key == ""
    await raw.close()


async def test_a_bootstrap_credential_of_another_site_in_the_request(w: cs.World) -> None:
    """Holding site-a's bootstrap, present site-b's (public) bootstrap JWT: refused."""
    mine, theirs = w.bootstrap_creds("site-a"), w.bootstrap_creds("site-b")
    raw = await w.asker(mine, "site-a")
    reply = await cs.ask(raw, B, "site-a", natsjwt.new_seed("user"), credential=helpers.creds_jwt(theirs))
    assert "site 'site-b''s, not 'site-a''s" in reply.error
    await raw.close()


async def test_an_expired_bootstrap_credential_is_refused_by_the_server(w: cs.World) -> None:
    old = w.work / "old.creds"
    old.write_text(
        w.keys.bootstrap_creds(
            "site-a",
            now=dt.datetime.now(dt.UTC) - dt.timedelta(hours=2),
            lifetime=dt.timedelta(hours=1),
            prefix="kb",
        )
    )
    await _refused_at_connect(w, old, "site-a")


async def test_renewal_extends_the_sites_own_key_only(w: cs.World) -> None:
    seed, token, _raw, _ = await _bootstrap(w)
    site = await w.asker(_creds(w, token, seed), "site-a")
    renewed = await cs.ask(site, R, "site-a", seed, credential=token)
    assert renewed.jwt and natsjwt.decode(renewed.jwt).sub == natsjwt.public_of(seed)
    # renewing someone else's key: the proof is by the asker's seed, the key is not its own
    other = natsjwt.new_seed("user")
    refused = await cs.ask(site, R, "site-a", other, credential=token)
    assert "renews the key it connected with" in refused.error
    # on another site's subject: the server refuses
    await site.publish("kb.renew.site-b", b"{}", reply=site.inbox())
    await site.denied("publish", "kb.renew.site-b")
    await site.close()
    # A grant is counted once its answer has reached the server: the asker may hold it first.
    await helpers.eventually(
        lambda: (w.counted("renew", "granted"), w.counted("renew", "refused")),
        lambda counts: counts == (1.0, 1.0),
        what="the renewal and the refusal counted",
    )


async def test_a_forged_proof_or_a_stale_request_is_refused(w: cs.World) -> None:
    seed, token, _raw, _ = await _bootstrap(w)
    site = await w.asker(_creds(w, token, seed), "site-a")
    good = credentials.request(R, "site-a", seed, credential=token)
    forged = msgspec.structs.replace(good, public_key=natsjwt.public_of(natsjwt.new_seed("user")))
    reply = credentials.Reply(
        **msgspec.json.decode((await site.ask("kb.renew.site-a", msgspec.json.encode(forged))).data)
    )
    assert "proof does not verify" in reply.error
    stale = credentials.request(
        R, "site-a", seed, credential=token, now=dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    )
    reply = credentials.Reply(
        **msgspec.json.decode((await site.ask("kb.renew.site-a", msgspec.json.encode(stale))).data)
    )
    assert "a replay, or the site's clock is off" in reply.error
    garbage = await site.ask("kb.renew.site-a", b"\xff not json")
    assert "credential request" in msgspec.json.decode(garbage.data, type=credentials.Reply).error
    await site.close()


async def test_an_answer_aimed_outside_the_sites_inbox_is_never_sent(w: cs.World) -> None:
    """The hub may publish intents: a request whose reply subject is site-b's intent subject
    must not make it write there."""
    seed, token, _raw, _ = await _bootstrap(w)
    hub = await ns.connect_hub(w.server, w.conf)
    await hub.listen("kb.intent.>")
    site = await w.asker(_creds(w, token, seed), "site-a")
    req = msgspec.json.encode(credentials.request(R, "site-a", seed, credential=token))
    await site.publish("kb.renew.site-a", req, reply="kb.intent.site-b.tenants.cp1")
    await helpers.eventually(lambda: w.counted("renew", "unanswerable"), what="the request seen and dropped")
    await hub.nc.flush()
    assert hub.received == []
    await site.close()
    await hub.close()


async def test_no_credential_for_a_site_without_a_site_object(w: cs.World) -> None:
    creds = w.bootstrap_creds("site-c")
    raw = await w.asker(creds, "site-c")
    reply = await cs.ask(raw, B, "site-c", natsjwt.new_seed("user"), credential=helpers.creds_jwt(creds))
    assert "no Site 'site-c' in the management cluster" in reply.error
    await raw.close()


async def test_bootstrapping_again_revokes_the_sites_previous_key(w: cs.World) -> None:
    """An agent that lost its Secret bootstraps with a new key: the old one is thrown out."""
    seed1, token1, _raw1, _ = await _bootstrap(w)
    old = await w.asker(_creds(w, token1, seed1), "site-a")
    seed2, token2, _raw2, _ = await _bootstrap(w)
    await helpers.eventually(lambda: not old.nc.is_connected, what="the old key disconnected")
    assert (await w.record("site-a")).key == natsjwt.public_of(seed2)
    renewal = await cs.ask(
        await w.asker(_creds(w, token2, seed2), "site-a"), R, "site-a", seed2, credential=token2
    )
    assert renewal.jwt


async def test_a_lost_answer_can_be_asked_again_within_the_grace_then_the_bootstrap_is_revoked(
    tmp_path: Path,
) -> None:
    """The agent's answer was lost (a timeout, a disconnect): within the grace it asks again
    with the same key and gets it; another key is refused; then the bootstrap is revoked."""
    async with cs.world(tmp_path, bootstrap_grace=3) as world:
        await world.add_site("site-a")
        creds = world.bootstrap_creds("site-a")
        raw = await world.asker(creds, "site-a")
        seed, jwt = natsjwt.new_seed("user"), helpers.creds_jwt(creds)
        first = await cs.ask(raw, B, "site-a", seed, credential=jwt)
        again = await cs.ask(raw, B, "site-a", seed, credential=jwt)
        assert first.jwt and again.jwt, again.error
        assert natsjwt.decode(again.jwt).sub == natsjwt.public_of(seed)
        other = await cs.ask(raw, B, "site-a", natsjwt.new_seed("user"), credential=jwt)
        assert "single-use" in other.error
        await helpers.eventually(
            lambda: not raw.nc.is_connected, within=20, what="the bootstrap revoked after the grace"
        )
        await _refused_at_connect(world, creds, "site-a")


async def test_a_credential_that_cannot_be_recorded_is_refused_and_revokes_nothing(w: cs.World) -> None:
    """The Site goes between the hub's look and its write: nothing is minted, so neither the
    bootstrap nor the site's current key may be revoked."""
    seed, token, _raw, _ = await _bootstrap(w)
    current = await w.asker(_creds(w, token, seed), "site-a")

    async def delete_site(site: str) -> None:  # gone at once: no hub left to hold its finalizer
        await w.kube.patch(resources.SITE, site, {"metadata": {"finalizers": []}})
        await w.kube.delete(resources.SITE, site)

    w.after_record = delete_site
    creds = w.bootstrap_creds("site-a")
    asker = await w.asker(creds, "site-a")
    reply = await cs.ask(asker, B, "site-a", natsjwt.new_seed("user"), credential=helpers.creds_jwt(creds))
    assert not reply.jwt and "no Site 'site-a'" in reply.error
    await ns.alive(w.server, current, asker)  # the current key and the unused bootstrap still work
    await current.close()
    await asker.close()
