"""The observer's credential (``kamaji-broker status``'s read-only user) in operator mode: it
expires, ``kamaji-broker observer issue`` signs it again, ``observer revoke`` ends it.

A copy of ``observer.creds`` (a laptop, a CI secret) must not read the fleet forever: the
server refuses it once expired, and at once after a revocation, which the hub's own pushes of
the account keep. Real nats-server in operator mode; the commands as an operator runs them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from common import bus
from common.files import natsserver, operator
from hub.credentials import revocation
from kamaji_broker import cli
from protocol import credentials, natsjwt, permissions
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


def _copy(source: Path, target: Path) -> Path:
    """A copy of a credential, as one is left on a laptop or in a CI secret."""
    shutil.copyfile(source, target)
    return target


def _claims(conf: Path) -> natsjwt.Claims:
    return natsjwt.decode(helpers.creds_jwt(conf / natsserver.OBSERVER_CREDS), now=0)


async def _observer(srv: natsd.NatsServer, creds: Path) -> ns.Raw:
    raw = await ns.connect(srv, creds, inbox_prefix=permissions.OBSERVER_INBOX)
    await raw.ask("$JS.API.CONSUMER.INFO.KB_INTENTS.agent-site-a")  # what status reads: answered
    return raw


async def _observer_cli(*argv: str) -> int:
    return await asyncio.to_thread(cli.main, ["observer", *argv])


async def test_the_observer_credential_nats_config_writes_expires_within_a_day(
    server: tuple[natsd.NatsServer, Path],
) -> None:
    _, conf = server
    claims = _claims(conf)
    assert claims.exp and claims.exp - claims.iat == int(
        credentials.DEFAULT_OBSERVER_LIFETIME.total_seconds()
    )


async def test_an_expired_observer_credential_is_refused_and_issue_signs_it_again(
    server: tuple[natsd.NatsServer, Path], tmp_path: Path
) -> None:
    srv, conf = server
    dir_ = ["--nats-config-dir", str(conf)]
    assert await _observer_cli("issue", *dir_, "--lifetime", "2s") == 0
    short = _copy(conf / natsserver.OBSERVER_CREDS, tmp_path / "copied-observer.creds")
    connected = await _observer(srv, short)
    await helpers.eventually(lambda: not connected.nc.is_connected, within=10, what="dropped at expiry")
    # the server refuses a JWT once its expiry (whole seconds) is in the past, not during that second
    await helpers.eventually(lambda: time.time() >= _claims(conf).exp + 1, within=5)
    refused = await ns.refusal(srv, user_credentials=str(short), inbox_prefix=permissions.OBSERVER_INBOX)
    assert "authorization violation" in refused or "expired" in refused

    assert await _observer_cli("issue", *dir_) == 0
    assert _claims(conf).sub == natsjwt.decode(helpers.creds_jwt(short), now=0).sub  # the same key
    again = await _observer(srv, conf / natsserver.OBSERVER_CREDS)
    await again.close()


async def test_revoking_the_observer_throws_every_copy_out_and_gives_it_a_new_key(
    server: tuple[natsd.NatsServer, Path], tmp_path: Path
) -> None:
    """A copy of the current credential, connected, and one of the same key signed earlier:
    both are out at once; the new credential reads what status reads."""
    srv, conf = server
    dir_ = ["--nats-config-dir", str(conf)]
    earlier = _copy(conf / natsserver.OBSERVER_CREDS, tmp_path / "earlier.creds")
    await asyncio.sleep(1.1)  # a JWT's issue time is in whole seconds
    assert await _observer_cli("issue", *dir_) == 0
    copy = _copy(conf / natsserver.OBSERVER_CREDS, tmp_path / "copy.creds")
    connected = await _observer(srv, copy)
    old_key = _claims(conf).sub

    ca = helpers.ca_for(srv.url)
    assert ca is not None
    assert await _observer_cli("revoke", *dir_, "--nats-url", srv.url, "--nats-ca-file", str(ca)) == 0

    await helpers.eventually(lambda: not connected.nc.is_connected, within=5, what="the observer thrown out")
    for stale in (copy, earlier):
        refused = await ns.refusal(srv, user_credentials=str(stale), inbox_prefix=permissions.OBSERVER_INBOX)
        assert "authorization violation" in refused
    assert _claims(conf).sub != old_key
    fresh = await _observer(srv, conf / natsserver.OBSERVER_CREDS)
    await fresh.close()


async def test_the_hubs_next_push_keeps_the_observers_revocation(
    server: tuple[natsd.NatsServer, Path],
) -> None:
    """The hub is the account's usual writer: what it pushes next (a site's revocation, its
    periodic sync) carries the observer's revocation along, and the revoked copy stays out."""
    srv, conf = server
    revoked = _copy(conf / natsserver.OBSERVER_CREDS, conf / "revoked-observer.creds")
    ca = helpers.ca_for(srv.url)
    assert ca is not None
    code = await _observer_cli(
        "revoke", "--nats-config-dir", str(conf), "--nats-url", srv.url, "--nats-ca-file", str(ca)
    )
    assert code == 0
    keys = operator.Keys.load_or_create(conf)
    authority = revocation.Authority(
        account=keys.account_public,
        account_signing=keys.account_signing,
        operator_signing=keys.operator_signing,
    )
    system = await bus.connect(
        helpers.options(srv.url, seed_file=conf / operator.HUB_SYSTEM_CREDS), deadline=10
    )
    try:
        hub = revocation.Revoker(system, authority)
        other = natsjwt.public_of(natsjwt.new_seed("user"))
        await hub.revoke({other: int(time.time())}, now=dt.datetime.now(dt.UTC))
        held = await revocation.held_revocations(system, authority.account)
        assert natsjwt.decode(helpers.creds_jwt(revoked), now=0).sub in held and other in held
    finally:
        await system.close()
    refused = await ns.refusal(srv, user_credentials=str(revoked), inbox_prefix=permissions.OBSERVER_INBOX)
    assert "authorization violation" in refused


async def test_with_observer_creds_lost_revoke_ends_the_key_in_observer_nk(
    server: tuple[natsd.NatsServer, Path], tmp_path: Path
) -> None:
    """The operator lost ``observer.creds`` (a copy of it may be out there): ``revoke`` takes the
    key from ``observer.nk``, and the copy is refused."""
    srv, conf = server
    copy = _copy(conf / natsserver.OBSERVER_CREDS, tmp_path / "copy.creds")
    old_key = _claims(conf).sub
    (conf / natsserver.OBSERVER_CREDS).unlink()
    ca = helpers.ca_for(srv.url)
    assert ca is not None
    code = await _observer_cli(
        "revoke", "--nats-config-dir", str(conf), "--nats-url", srv.url, "--nats-ca-file", str(ca)
    )
    assert code == 0
    refused = await ns.refusal(srv, user_credentials=str(copy), inbox_prefix=permissions.OBSERVER_INBOX)
    assert "authorization violation" in refused
    assert _claims(conf).sub != old_key
    fresh = await _observer(srv, conf / natsserver.OBSERVER_CREDS)
    await fresh.close()
