"""The attack suite: every case tries what a hostile site, tenant or bus peer would,
and asserts the exact refusal, that nothing changed, and that every process is still alive.

Everything under tests/security carries the ``security`` marker, so the suite runs alone with
``pytest -m security``; it also runs in ``make test``. It is a permanent suite: a change that
breaks one of its cases is a regression.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from nats.aio.client import Client

from sandbox import natsd
from tests.security import nats_support as ns
from tests.security import site_support

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.security)


# Raw nats-py clients of tests/security/test_grants.py and test_nats_attacks.py: the hub with
# the topology of nats_support.SITES and their messages, and site-a as an attacker.


# Every case runs against both kinds of identity: static NKey users in auth.conf, and the JWTs
# of operator mode, which must carry exactly the same grants.


@pytest.fixture(params=["static", "operator"])
def attacked(request: pytest.FixtureRequest) -> tuple[natsd.NatsServer, Path]:
    """The server under attack and its config dir: ``static_nats`` or ``secured_nats``."""
    fixture = "static_nats" if request.param == "static" else "secured_nats"
    server: tuple[natsd.NatsServer, Path] = request.getfixturevalue(fixture)
    return server


@pytest.fixture
async def hub(attacked: tuple[natsd.NatsServer, Path]) -> AsyncIterator[ns.Raw]:
    raw = await ns.prepare(*attacked)
    yield raw
    await raw.close()


@pytest.fixture
async def site_a(attacked: tuple[natsd.NatsServer, Path], hub: ns.Raw) -> AsyncIterator[ns.Raw]:
    raw = await ns.connect_site(*attacked, "site-a")
    yield raw
    await raw.close()


@pytest.fixture
async def wiretap(secured_nats: tuple[natsd.NatsServer, Path]) -> AsyncIterator[Client]:
    """The test's wiretap on ``secured_nats`` (``site_support.wiretap``): what the suite reads
    to see every message a subject was given, not an identity of the product."""
    async with site_support.wiretap(*secured_nats) as nc:
        yield nc
