"""A connection nats-py gives up on (the server sent an error and closed it) is said to be lost,
with the server's reason; a process that cannot do without it ends, failing, and says why."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from pathlib import Path

import prometheus_client
import pytest

from common import bus, service
from common.bus import errors as bus_errors
from common.files import operator
from protocol import natsjwt
from sandbox import natsd
from tests import helpers

SUBS = 3
"""The user's subscription limit: one more, and the server closes its connection."""


def few_subscriptions(conf: Path, tmp_path: Path) -> Path:
    """The .creds of a user of the account that may hold ``SUBS`` subscriptions."""
    keys = operator.Keys.load_or_create(conf)
    seed = natsjwt.new_seed("user")
    iat = int(dt.datetime.now(dt.UTC).timestamp())
    user = natsjwt.User(
        pub=natsjwt.Allow(("lost.>",)), sub=natsjwt.Allow(("lost.>", "_INBOX.>")), subs=SUBS,
        issuer_account=keys.account_public,
    )  # fmt: skip
    claims = natsjwt.Claims(
        sub=natsjwt.public_of(seed), iss="", iat=iat, exp=iat + 600, name="few-subs", nats=user
    )
    path = tmp_path / "few.creds"
    path.write_text(keys.user_creds(claims, seed))
    return path


async def overflow(conn: bus.Connection) -> None:
    async def ignore(_: bus.Message) -> None:
        pass

    for i in range(SUBS):
        await conn.subscribe(f"lost.{i}", ignore)
    # The one too many: the server closes the connection instead of answering, and the call
    # says so at once (nats-py alone would leave it waiting for the server until its timeout).
    with pytest.raises(bus_errors.Unavailable, match=f"subscribe to lost.{SUBS}: nats: connection closed"):
        await conn.subscribe(f"lost.{SUBS}", ignore)


async def test_the_server_closing_the_connection_is_a_loss_with_its_reason(
    secured_nats: tuple[natsd.NatsServer, Path], tmp_path: Path
) -> None:
    server, conf = secured_nats
    creds = few_subscriptions(conf, tmp_path)
    # A call that would wait for the server all day: the closing must end it, not a timeout.
    patient = dataclasses.replace(helpers.options(server.url, seed_file=creds), request_timeout=3600)
    conn = await bus.connect(patient, deadline=10)
    try:
        assert conn.lost == []
        await asyncio.wait_for(overflow(conn), 60)
        lost = await helpers.eventually(lambda: list(conn.lost), what="the connection lost")
        assert lost == ["nats: maximum subscriptions exceeded"]
    finally:
        await conn.close()


async def test_closing_a_connection_is_no_loss(
    secured_nats: tuple[natsd.NatsServer, Path], tmp_path: Path
) -> None:
    server, conf = secured_nats
    conn = await bus.connect(
        helpers.options(server.url, seed_file=few_subscriptions(conf, tmp_path)), deadline=10
    )
    await conn.close()
    assert conn.lost == [] and not conn.connected


class _Process(service.Service):
    exit_when_bus_lost = True

    def __init__(self, options: bus.Options) -> None:
        super().__init__()
        self.options = options

    async def start(self) -> None:
        await self.serve_health("127.0.0.1:0", prometheus_client.CollectorRegistry())
        self.conn = await bus.connect(self.options, deadline=10)
        self.spawn("nats-monitor", self.watch_nats)
        await overflow(self.conn)


async def test_a_process_that_lost_its_connection_ends_failing_and_says_why(
    secured_nats: tuple[natsd.NatsServer, Path], tmp_path: Path
) -> None:
    server, conf = secured_nats
    process = _Process(helpers.options(server.url, seed_file=few_subscriptions(conf, tmp_path)))
    with pytest.raises(service.Ended) as ended:
        await asyncio.wait_for(service.run_until_signalled(process), 30)
    assert str(ended.value) == (
        "NATS connection closed for good: nats: maximum subscriptions exceeded; "
        "exiting, to connect again in a new process"
    )
    ok, why = process.readiness.checks[service.NATS_CHECK]
    assert not ok and why.startswith("NATS connection closed for good: nats: maximum subscriptions")


async def test_a_process_that_goes_on_keeps_saying_its_connection_was_lost(
    secured_nats: tuple[natsd.NatsServer, Path], tmp_path: Path
) -> None:
    """An agent's: not ready, for that reason, pass after pass (not "reconnecting": nothing will)."""
    server, conf = secured_nats
    process = _Process(helpers.options(server.url, seed_file=few_subscriptions(conf, tmp_path)))
    process.exit_when_bus_lost = False
    seen: list[bool] = []
    await process.serve_health("127.0.0.1:0", prometheus_client.CollectorRegistry())
    process.conn = await bus.connect(process.options, deadline=10)
    process.spawn("nats-monitor", lambda: process.watch_nats(seen.append))
    try:
        await overflow(process.conn)
        await helpers.eventually(lambda: seen.count(False), lambda n: n >= 3, within=15, what="3 passes")
        ok, why = process.readiness.checks[service.NATS_CHECK]
        assert not ok and why == "NATS connection closed for good: nats: maximum subscriptions exceeded"
        assert not process.ending.is_set() and process.ended == []
    finally:
        await process.stop()
