"""Rotating the account's and the operator's signing keys (`nats-config --rotate-signing-key`,
`--retire-previous-signing-keys`) against a real nats-server in operator mode, with the hub's
account sync (``hub.credentials.revocation.sync_account``): users keep working through a rotation, those
signed by a retired key are thrown out, and revocations survive every step and restart."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from common import bus
from common.files import operator as natsoperator
from hub.credentials import operator as operatormode
from hub.credentials import revocation
from kamaji_broker import cli
from protocol import credentials, natsjwt
from sandbox import natsd
from tests import conftest, helpers
from tests.security import nats_support as ns


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[natsd.NatsServer, Path]]:
    srv, conf = conftest.operator_mode_server(tmp_path)
    srv.start()
    yield srv, conf
    srv.stop()


def _nats_config(srv: natsd.NatsServer, conf: Path, *flags: str) -> None:
    """`nats-config` again, as the operator runs it for a rotation (the server's own flags)."""
    tls = helpers.nats_tls()
    assert tls.ca is not None
    same = ["--host", "127.0.0.1", "--port", str(srv.port), "--store-dir", str(srv.store_dir)]
    same += ["--tls-cert", str(tls.cert), "--tls-key", str(tls.key), "--tls-ca", str(tls.ca)]
    assert cli.main(["nats-config", "--dir", str(conf), *same, *flags]) == 0


def _site_creds(conf: Path, name: str) -> Path:
    """A site-a user minted with the account's current signing key."""
    keys = natsoperator.Keys.load_or_create(conf)
    seed = natsjwt.new_seed("user")
    claims = credentials.site_user(
        "site-a", natsjwt.public_of(seed), account=keys.account_public, now=dt.datetime.now(dt.UTC)
    )
    path = conf / f"{name}.creds"
    path.write_text(keys.user_creds(claims, seed))
    return path


async def _sync(srv: natsd.NatsServer, conf: Path) -> bool:
    """What the hub does at its start with the directory nats-config wrote for it."""
    authority = operatormode.load(conf / natsoperator.HUB_DIR).authority
    system = await bus.connect(
        helpers.options(srv.url, seed_file=conf / natsoperator.HUB_SYSTEM_CREDS), deadline=10
    )
    try:
        return await revocation.sync_account(system, authority, now=dt.datetime.now(dt.UTC))
    finally:
        await system.close()


async def test_rotating_the_account_signing_key_keeps_users_until_the_old_key_is_retired(
    server: tuple[natsd.NatsServer, Path],
) -> None:
    srv, conf = server
    old_user = await ns.connect(srv, _site_creds(conf, "old"), inbox_prefix="_INBOX_site-a")
    assert await _sync(srv, conf) is False, "nothing to push before a rotation"
    _nats_config(srv, conf, "--rotate-signing-key", "account")
    assert await _sync(srv, conf) is True
    new_user = await ns.connect(srv, _site_creds(conf, "new"), inbox_prefix="_INBOX_site-a")
    await ns.alive(srv, old_user, new_user)  # both keys trusted during the rotation
    _nats_config(srv, conf, "--retire-previous-signing-keys")
    assert await _sync(srv, conf) is True
    await helpers.eventually(lambda: not old_user.nc.is_connected, what="the old key's user thrown out")
    await ns.alive(srv, new_user)
    with pytest.raises(Exception, match=r"(?i)authorization violation"):
        await ns.connect(srv, conf / "old.creds", inbox_prefix="_INBOX_site-a")
    await new_user.close()


async def test_rotating_the_operator_signing_key_keeps_revocations_across_restarts(
    server: tuple[natsd.NatsServer, Path],
) -> None:
    srv, conf = server
    user = _site_creds(conf, "user")
    revoked = _site_creds(conf, "revoked")
    authority = operatormode.load(conf / natsoperator.HUB_DIR).authority
    system = await bus.connect(
        helpers.options(srv.url, seed_file=conf / natsoperator.HUB_SYSTEM_CREDS), deadline=10
    )
    now = dt.datetime.now(dt.UTC)
    await revocation.revoke(
        system, authority, {natsjwt.decode(helpers.creds_jwt(revoked)).sub: int(now.timestamp())}, now=now
    )
    await system.close()
    for step in (("--rotate-signing-key", "operator"), ("--retire-previous-signing-keys",)):
        _nats_config(srv, conf, *step)  # operator.conf changes: the servers restart with it
        srv.restart()
        await _sync(srv, conf)
        srv.restart()  # and once more from the resolver's copy alone
        ok = await ns.connect(srv, user, inbox_prefix="_INBOX_site-a")
        await ns.alive(srv, ok)
        await ok.close()
        with pytest.raises(Exception, match=r"(?i)authorization violation"):
            await ns.connect(srv, revoked, inbox_prefix="_INBOX_site-a")
    operator = natsjwt.decode((conf / natsoperator.KEYS_DIR / "operator.jwt").read_text())
    assert isinstance(operator.nats, natsjwt.Operator) and len(operator.nats.signing_keys) == 1


def test_rotation_flags_need_operator_mode_and_one_step_at_a_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        cli.main(
            [
                "nats-config",
                "--dir",
                str(tmp_path / "s"),
                "--auth",
                "static",
                "--rotate-signing-key",
                "account",
            ]
        )
        == 2
    )
    assert "in operator mode" in capsys.readouterr().err
    assert cli.main(["nats-config", "--dir", str(tmp_path / "o")]) == 0
    both = ["--rotate-signing-key", "account", "--retire-previous-signing-keys"]
    assert cli.main(["nats-config", "--dir", str(tmp_path / "o"), *both]) == 2
    assert "rotate first, retire later" in capsys.readouterr().err
