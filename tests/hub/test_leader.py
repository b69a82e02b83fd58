"""hub.leader against the emulator: one leader at a time, takeover after lapse or release."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from common import kube as ckube
from common.kube import resources
from hub import leader
from tests import helpers

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("spec", "expired"),
    [
        ({}, True),
        (
            {"holderIdentity": "a", "renewTime": "2026-11-30T11:59:55.000000Z", "leaseDurationSeconds": 15},
            False,
        ),
        (
            {"holderIdentity": "a", "renewTime": "2026-11-30T11:59:40.000000Z", "leaseDurationSeconds": 15},
            True,
        ),
        (
            {"holderIdentity": None, "renewTime": "2026-11-30T11:59:59.000000Z", "leaseDurationSeconds": 15},
            True,
        ),
        ({"holderIdentity": "a", "leaseDurationSeconds": 15}, True),
    ],
)
def test_expired(spec: dict[str, object], expired: bool) -> None:
    assert leader.expired({"spec": spec}, now=NOW) is expired


def elector(kube: ckube.Kube, identity: str) -> leader.Elector:
    return leader.Elector(
        kube=kube,
        namespace="default",
        name="kamaji-broker-hub",
        identity=identity,
        lease_duration=1.0,
        renew_interval=0.2,
    )


async def test_one_leader_then_takeover_when_it_stops_renewing(kube: ckube.Kube) -> None:
    a, b = elector(kube, "hub-a"), elector(kube, "hub-b")
    ta = asyncio.create_task(a.run())
    await helpers.eventually(lambda: a.leading.is_set())
    tb = asyncio.create_task(b.run())
    await helpers.eventually(lambda: b.standby.is_set(), what="b's first round (standby)")
    renewals: set[str] = set()

    async def a_renewed_thrice() -> bool:
        lease = await kube.get(resources.LEASE, "kamaji-broker-hub", namespace="default")
        renewals.add(lease["spec"]["renewTime"])
        return len(renewals) > 3

    # Several of b's rounds (b tries every renew interval, as a renews) while a holds its lease.
    await helpers.eventually(a_renewed_thrice, what="a renewed its lease three times")
    assert a.leading.is_set() and not b.leading.is_set()
    ta.cancel()  # a dies without releasing
    await asyncio.gather(ta, return_exceptions=True)
    await helpers.eventually(lambda: b.leading.is_set(), within=5)
    lease = await kube.get(resources.LEASE, "kamaji-broker-hub", namespace="default")
    assert lease["spec"]["holderIdentity"] == "hub-b" and lease["spec"]["leaseTransitions"] == 1
    tb.cancel()
    await asyncio.gather(tb, return_exceptions=True)


async def test_release_hands_over_at_once(kube: ckube.Kube) -> None:
    a, b = elector(kube, "hub-a"), elector(kube, "hub-b")
    a.lease_duration = 3600  # a's lease lasts an hour: only a release lets b in now
    ta = asyncio.create_task(a.run())
    await helpers.eventually(lambda: a.leading.is_set())
    ta.cancel()
    await asyncio.gather(ta, return_exceptions=True)
    assert not await b.try_acquire_or_renew()
    await a.release()
    assert await b.try_acquire_or_renew()


async def test_concurrent_candidates_never_both_win(kube: ckube.Kube) -> None:
    candidates = [elector(kube, f"hub-{i}") for i in range(5)]
    wins = await asyncio.gather(*(c.try_acquire_or_renew() for c in candidates))
    assert sum(wins) == 1
