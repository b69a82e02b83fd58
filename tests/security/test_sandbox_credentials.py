"""The sandbox's own NATS users against its running topology: what the launcher signs for tests,
benches and its live view must not be a door that outlives what it was signed for.

The former launcher wrote, at start, ``nats/sites/<site>.creds`` (a site JWT valid 7 days for a
key no Site recorded: it still connected after ``kubectl delete site``) and
``nats/launcher-hub.creds`` (the hub's permissions for 7 days). Now nothing is written before it
is asked for, every such user lives an hour, and a site's is for the key its Site records, so
deleting the Site ends it with the agent's.

Runs ``sandbox.launcher.System`` with one site (nats-server, emulated clusters, hub, agent) as
processes. The last case deletes the Site: it runs last.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from common import bus
from common.files import natsserver
from common.kube import resources
from protocol import natsjwt, streams
from sandbox import processes
from sandbox.launcher import System, identities
from tests import helpers, systems
from tests.security import nats_support as ns

pytestmark = pytest.mark.asyncio(loop_scope="module")

SITE = "site-a"
HOUR = int(identities.CREDENTIAL_LIFETIME.total_seconds())


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[System]:
    directory = tmp_path_factory.mktemp("sandbox-credentials") / "sandbox"
    async with systems.running(directory, sites=(SITE,), base=[]) as topology:
        yield topology


def _claims(path: Path) -> natsjwt.Claims:
    return natsjwt.decode(helpers.creds_jwt(path), now=0)


async def test_the_sandbox_leaves_no_site_or_hub_credential_of_its_own_before_one_is_asked_for(
    world: System,
) -> None:
    """What the production commands wrote (``nats-config``, ``site add``) is all there is: the
    agent bootstrapped with its single-use credential, and no other user of the site exists."""
    assert not world.site_credential_file(SITE).exists()
    assert not world.hub_credential_file.exists()
    assert sorted(p.name for p in (world.nats_dir / natsserver.SITES_DIR).glob("*.creds")) == [
        f"{SITE}{natsserver.BOOTSTRAP_SUFFIX}"
    ]


async def test_the_launchers_hub_user_lives_an_hour_and_is_signed_again_when_half_gone(
    world: System,
) -> None:
    path = world.hub_credential()
    first = _claims(path)
    assert first.name == "hub" and 0 < first.exp - first.iat <= HOUR
    assert _claims(world.hub_credential()).sub == first.sub  # fresh: kept
    conn = await bus.connect(helpers.options(world.nats_url, seed_file=path), deadline=10)
    await conn.close()


async def test_a_site_credential_is_for_the_key_its_site_records_and_lives_an_hour(world: System) -> None:
    path = await world.site_credential(SITE)
    claims = _claims(path)
    site = await world.mgmt.get(resources.SITE, SITE)
    assert claims.sub == site["status"]["credential"]["publicKey"]  # the agent's: recorded
    assert claims.name == f"site:{SITE}" and 0 < claims.exp - claims.iat <= HOUR
    await _bind_own_consumer(world, path)


async def _bind_own_consumer(world: System, path: Path) -> None:
    options = helpers.options(world.nats_url, seed_file=path, inbox_prefix=bus.site_inbox_prefix(SITE))
    conn = await bus.connect(options, deadline=10)
    try:
        await (await bus.bind(conn, streams.agent_consumer(SITE))).unsubscribe()
    finally:
        await conn.close()


async def test_deleting_the_site_ends_its_credential_and_none_is_signed_again(world: System) -> None:
    """The attack: the site's credential from the sandbox's directory, after ``kubectl delete
    site``: refused, like the agent's own; and the launcher signs no new one."""
    path = await world.site_credential(SITE)
    taken = world.directory / "taken.creds"
    taken.write_bytes(path.read_bytes())
    await world.mgmt.delete(resources.SITE, SITE)
    await helpers.eventually(
        lambda: world.mgmt.get_or_none(resources.SITE, SITE), lambda s: s is None, what="the Site gone"
    )
    for creds in (taken, path):
        refused = await ns.refusal_at(
            world.nats_url, user_credentials=str(creds), inbox_prefix=bus.site_inbox_prefix(SITE)
        )
        assert "authorization violation" in refused
    with pytest.raises(processes.LaunchError, match="records no key its agent holds"):
        await world.site_credential(SITE)
    assert dt.datetime.now(dt.UTC).timestamp() < _claims(taken).exp  # refused while still unexpired
