"""hub.shards against the emulator: replicas share the sites and never lead one twice through a
join, a death and a clean stop; a deleted Lease, an identity given twice and a view that cannot
be read all make the safe choice (lead less, never more)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator

import pytest

from common import kube as ckube
from common.kube import resources
from hub import shards
from hub.reconcile import shares
from tests import helpers

SITES = [f"site-{i:02d}" for i in range(40)]
GROUP = "kamaji-broker-hub"


class Replica:
    """One replica's membership, run as a task; ``led`` is what its latest share leads."""

    def __init__(self, kube: ckube.Kube, identity: str) -> None:
        self.membership = shards.Membership(
            kube=kube, namespace="default", group=GROUP, identity=identity, on_change=self._changed,
            lease_duration=1.0, renew_interval=0.1,
        )  # fmt: skip
        self.led: set[str] = set()
        self.task: asyncio.Task[None] | None = None

    async def _changed(self, share: shares.Share) -> None:
        self.led = {s for s in SITES if share.holds(s)}

    def start(self) -> Replica:
        self.task = asyncio.create_task(self.membership.run())
        return self

    async def kill(self) -> None:
        """Dies: no release, its Lease left to run out."""
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        self.led = set()  # a process that is gone leads nothing


@contextlib.asynccontextmanager
async def running(*replicas: Replica) -> AsyncIterator[None]:
    for r in replicas:
        r.start()
    try:
        yield
    finally:
        for r in replicas:
            await r.kill()


def overlap(replicas: list[Replica]) -> set[str]:
    return {s for a, b in itertools.combinations(replicas, 2) for s in a.led & b.led}


async def every_site_led_once(replicas: list[Replica], watch: list[Replica]) -> None:
    """Until ``replicas`` lead every site between them; no site led by two of ``watch`` meanwhile."""

    async def done() -> bool:
        assert overlap(watch) == set()
        return all(r.led for r in replicas) and sorted(s for r in replicas for s in r.led) == SITES

    await helpers.eventually(done, within=15, every=0.02, what="every site led once")


async def test_a_join_a_death_and_a_clean_stop(kube: ckube.Kube) -> None:
    a, b, c = Replica(kube, "hub-a"), Replica(kube, "hub-b"), Replica(kube, "hub-c")
    every = [a, b, c]
    async with running(a):
        await every_site_led_once([a], every)
        b.start()
        await every_site_led_once([a, b], every)
        assert a.led and b.led
        c.start()
        await every_site_led_once([a, b, c], every)
        await c.kill()  # its Lease runs out: a and b take its sites
        await every_site_led_once([a, b], every)
        await b.membership.release()  # a clean stop: an empty view, then no Lease
        await b.kill()
        await every_site_led_once([a], every)
        lease = await kube.get_or_none(resources.LEASE, b.membership.name, namespace="default")
        assert lease is None


async def test_a_deleted_lease_counts_until_it_would_have_run_out(kube: ckube.Kube) -> None:
    """Deleted by someone (not released): its holder still leads until it notices, so its peer
    waits out the duration; the holder lapses and leads nothing for a duration once it did."""
    a, b = Replica(kube, "hub-a"), Replica(kube, "hub-b")
    async with running(a, b):
        await every_site_led_once([a, b], [a, b])
        await kube.delete(resources.LEASE, b.membership.name, namespace="default")
        await helpers.eventually(lambda: not b.led, within=5, every=0.02, what="b lapsed")
        assert overlap([a, b]) == set()
        await every_site_led_once([a, b], [a, b])


async def test_one_identity_given_to_two_replicas_is_never_led_twice_and_says_why(
    kube: ckube.Kube, caplog: pytest.LogCaptureFixture
) -> None:
    a, twin, other = Replica(kube, "hub-a"), Replica(kube, "hub-a"), Replica(kube, "hub-b")
    its_share = {s for s in SITES if shares.owner(s, ("hub-a", "hub-b")) == "hub-b"}
    async with running(a, twin, other):
        await helpers.eventually(lambda: other.led == its_share, within=10, what="hub-b leads its share")
        for _ in range(20):  # the twins' writes race: at most one of them ever leads
            await asyncio.sleep(0.1)
            assert not (a.led and twin.led) and other.led == its_share
    assert "written by another process" in caplog.text


async def test_a_peer_whose_view_cannot_be_read_claims_every_site(kube: ckube.Kube) -> None:
    body = {
        "apiVersion": resources.LEASE.api_version, "kind": resources.LEASE.kind,
        "metadata": {"name": shards.lease_name(GROUP, "hub-z"), "namespace": "default",
                     "labels": {shards.GROUP_LABEL: GROUP},
                     "annotations": {shards.VIEW_ANNOTATION: "not json"}},
        "spec": {"holderIdentity": "hub-z", "leaseDurationSeconds": 3600},
    }  # fmt: skip
    await kube.create(resources.LEASE, body, namespace="default")
    a = Replica(kube, "hub-a")
    async with running(a):
        await helpers.eventually(lambda: a.membership.share.view, within=5, what="a settled")
        for _ in range(5):
            await asyncio.sleep(0.2)
            assert a.led == set()
    assert shards.read_view(body, "hub-z") == ("hub-z",)
    assert shards.read_view({"metadata": {"annotations": {shards.VIEW_ANNOTATION: "[]"}}}, "hub-z") == ()


@pytest.mark.parametrize(
    ("renewed", "now", "budget"),
    [
        (None, 100.0, 10.0),  # before the first renewal, or after a lapse: a whole deadline
        (100.0, 100.0, 10.0),  # just renewed
        (100.0, 103.5, 6.5),  # what is left of it
        (100.0, 109.8, 0.2),
        (100.0, 110.0, 0.0),  # none left: no call, the round fails at once and the lapse follows
        (100.0, 130.0, 0.0),
    ],
)
def test_a_call_may_take_what_is_left_until_the_renew_deadline(
    renewed: float | None, now: float, budget: float
) -> None:
    assert shards.call_budget(renewed, now, 10.0) == pytest.approx(budget)
