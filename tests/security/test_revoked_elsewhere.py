"""A key revoked by another writer of the account (a second hub replica, ``kamaji-broker observer
revoke``) is revoked for this hub too, the next time it asks: it mints for none of them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from common import bus
from common.files import operator
from hub.credentials import revocation
from protocol import natsjwt
from sandbox import natsd
from tests import conftest, helpers


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[natsd.NatsServer, Path]]:
    srv, conf = conftest.operator_mode_server(tmp_path)
    srv.start()
    yield srv, conf
    srv.stop()


async def test_a_key_another_writer_revoked_is_revoked_here_too(
    server: tuple[natsd.NatsServer, Path],
) -> None:
    srv, conf = server
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
        here, elsewhere = revocation.Revoker(system, authority), revocation.Revoker(system, authority)
        first, later = (natsjwt.public_of(natsjwt.new_seed("user")) for _ in range(2))
        now = dt.datetime.now(dt.UTC)
        await elsewhere.revoke({first: int(now.timestamp())}, now=now)
        assert first in await here.revoked()  # the first look
        await elsewhere.revoke({later: int(now.timestamp())}, now=now)
        assert {first, later} <= await here.revoked()  # and every look after it
    finally:
        await system.close()
