"""Bootstrap credentials that outlive their purpose: a copy nobody used, one made before the
site's credential, one made for an earlier life of the Site.

A bootstrap credential is handed around (the hub's Secret, `site add`'s file) and more than one
may be valid at once. Whatever their holder does, it must read nothing of the agent's (its
inbox: its intents, its renewed JWT), and get nothing minted once its purpose is past.

Real nats-server in operator mode, real management-cluster emulator, ``hub.credentials.service``
as the hub runs it (``credential_support``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from common import bus
from protocol import credentials, natsjwt, permissions
from tests import helpers
from tests.security import credential_support as cs
from tests.security import nats_support as ns

B, R = credentials.Kind.BOOTSTRAP, credentials.Kind.RENEW


@pytest.fixture
async def w(tmp_path: Path) -> AsyncIterator[cs.World]:
    async with cs.world(tmp_path) as world:
        await world.add_site("site-a")
        yield world


async def _agent(w: cs.World, site: str = "site-a") -> tuple[bytes, str]:
    """A fresh agent key bootstrapped with a bootstrap credential of its own: (seed, JWT)."""
    creds = w.bootstrap_creds(site)
    raw = await w.asker(creds, site)
    seed = natsjwt.new_seed("user")
    reply = await cs.ask(raw, B, site, seed, credential=helpers.creds_jwt(creds))
    assert reply.jwt, reply.error
    await raw.close()
    return seed, reply.jwt


def _creds(w: cs.World, token: str, seed: bytes) -> Path:
    path = w.work / f"agent-{natsjwt.public_of(seed)[:8]}.creds"
    path.write_text(natsjwt.creds(token, seed))
    return path


async def test_an_unused_bootstrap_copy_reads_nothing_of_the_agents_inbox(w: cs.World) -> None:
    """The agent bootstrapped; another bootstrap credential of the site, never used, listens on
    the site's inbox: the server refuses, and neither the agent's JetStream reply nor its
    renewed JWT reaches it."""
    seed, token = await _agent(w)
    spare = await ns.connect(w.server, w.bootstrap_creds("site-a"), inbox_prefix="_INBOX_site-a")
    await spare.listen("_INBOX_site-a.>")
    await spare.denied("subscribe", "_INBOX_site-a.>")

    agent = await w.asker(_creds(w, token, seed), "site-a")
    await agent.ask("$JS.API.CONSUMER.INFO.KB_INTENTS.agent-site-a")  # a JetStream reply
    renewed = await cs.ask(agent, R, "site-a", seed, credential=token)
    assert renewed.jwt, renewed.error
    await spare.nc.flush()
    assert spare.received == []
    # what it may read is its own kind's inbox, where no agent reply ever comes
    await spare.listen(f"{permissions.bootstrap_inbox_prefix('site-a')}.>")
    assert [v for v in spare.violations if v[1] != "_inbox_site-a.>"] == []
    await ns.alive(w.server, agent, spare)
    await agent.close()
    await spare.close()


async def test_a_bootstrap_answer_is_sent_only_to_the_bootstrap_inbox(w: cs.World) -> None:
    """A bootstrap request that wants its answer in the site's inbox (where the agent reads) is
    not answered there, nor granted."""
    seed, token = await _agent(w)
    agent = await w.asker(_creds(w, token, seed), "site-a")
    await agent.listen("_INBOX_site-a.>")
    creds = w.bootstrap_creds("site-a")
    asker = await w.asker(creds, "site-a")
    req = credentials.request(B, "site-a", natsjwt.new_seed("user"), credential=helpers.creds_jwt(creds))

    await asker.publish("kb.bootstrap.site-a", msgspec.json.encode(req), reply="_INBOX_site-a.x.y")

    await helpers.eventually(
        lambda: w.counted("bootstrap", "unanswerable"), what="the request seen and dropped"
    )
    await agent.nc.flush()
    assert agent.received == []
    assert (await w.record("site-a")).key == natsjwt.public_of(seed)
    await agent.close()
    await asker.close()


async def test_a_bootstrap_older_than_the_sites_credential_is_refused_and_revoked(w: cs.World) -> None:
    """Made before the agent's credential was minted (a copy nobody used, or the one the agent
    used, after the hub's restart): refused, and thrown off the server at once."""
    old = w.bootstrap_creds("site-a")
    await asyncio.sleep(1.1)  # the Site records when it was minted in whole seconds
    await _agent(w)
    raw = await w.asker(old, "site-a")

    reply = await cs.ask(raw, B, "site-a", natsjwt.new_seed("user"), credential=helpers.creds_jwt(old))

    assert not reply.jwt and "single-use" in reply.error
    await helpers.eventually(lambda: not raw.nc.is_connected, what="the old bootstrap disconnected")
    refused = await ns.refusal(
        w.server, user_credentials=str(old), inbox_prefix=bus.site_inbox_prefix("site-a")
    )
    assert "authorization violation" in refused


async def test_deleting_a_site_ends_what_was_minted_for_it(w: cs.World) -> None:
    """The attack: site-c's agent bootstrapped (key K), and one more bootstrap credential was
    made for it, never used. ``kubectl delete site site-c`` revokes K; the Site is applied
    again. The unused bootstrap gets nothing (and is thrown out), and K gets no JWT again, not
    even with a bootstrap credential of the new Site: only a new key does."""
    await w.add_site("site-c")
    spare = w.bootstrap_creds("site-c", age=dt.timedelta(seconds=5))
    seed, token = await _agent(w, "site-c")
    agent = await w.asker(_creds(w, token, seed), "site-c")

    await w.delete_site("site-c")
    await helpers.eventually(lambda: not agent.nc.is_connected, what="the agent thrown out")
    await w.add_site("site-c")

    holder = await w.asker(spare, "site-c")
    reply = await cs.ask(holder, B, "site-c", seed, credential=helpers.creds_jwt(spare))
    assert not reply.jwt and "before Site 'site-c' was created" in reply.error
    await helpers.eventually(lambda: not holder.nc.is_connected, what="the earlier life's bootstrap revoked")

    fresh = w.bootstrap_creds("site-c")
    asker = await w.asker(fresh, "site-c")
    again = await cs.ask(asker, B, "site-c", seed, credential=helpers.creds_jwt(fresh))
    assert (
        not again.jwt and "was revoked" in again.error and "delete the agent's identity Secret" in again.error
    )
    assert (await w.record("site-c")).key == ""
    new_seed = natsjwt.new_seed("user")
    granted = await cs.ask(asker, B, "site-c", new_seed, credential=helpers.creds_jwt(fresh))
    assert granted.jwt and natsjwt.decode(granted.jwt).sub == natsjwt.public_of(new_seed), granted.error
    assert "authorization violation" in await ns.refusal(
        w.server, user_credentials=str(_creds(w, token, seed)), inbox_prefix="_INBOX_site-c"
    )


async def test_the_bootstrap_a_site_was_made_with_counts_in_its_life_only(w: cs.World) -> None:
    """``site add`` writes the bootstrap credential, then the Site is applied: older than the
    Site, it is taken because the Site names it. The same manifest applied again after a
    deletion names it still, but the deletion revoked it."""
    made_with = w.bootstrap_creds("site-d", age=dt.timedelta(seconds=5))
    other = w.bootstrap_creds("site-d", age=dt.timedelta(seconds=5))
    await w.add_site("site-d", bootstrap=made_with)
    refused = await cs.ask(
        await w.asker(other, "site-d"),
        B,
        "site-d",
        natsjwt.new_seed("user"),
        credential=helpers.creds_jwt(other),
    )
    assert "before Site 'site-d' was created" in refused.error
    waiting = await w.asker(made_with, "site-d")  # handed over, not used yet

    await w.delete_site("site-d")
    await helpers.eventually(lambda: not waiting.nc.is_connected, what="the unused bootstrap revoked")
    await w.add_site("site-d", bootstrap=made_with)
    assert "authorization violation" in await ns.refusal(
        w.server,
        user_credentials=str(made_with),
        inbox_prefix=permissions.bootstrap_inbox_prefix("site-d"),
    )
