"""hub.reconcile.shares: rendezvous ownership, and that no site is ever led by two replicas (or
by none, once the views agree) through every step of a join and a death."""

from __future__ import annotations

import collections

import pytest

from hub.reconcile import shares
from hub.reconcile.shares import Peer, Share

SITES = [f"site-{i:03d}" for i in range(300)]


def leaders(*replicas: Share) -> dict[str, list[str]]:
    held: dict[str, list[str]] = collections.defaultdict(list)
    for r in replicas:
        for site in [*SITES, shares.SINGLETONS]:
            if r.holds(site):
                held[site].append(r.me)
    return held


def test_every_site_has_one_owner_and_the_shares_are_near_even() -> None:
    members = ("a", "b", "c", "d")
    counts = collections.Counter(shares.owner(s, members) for s in SITES)
    assert set(counts) == set(members)
    assert min(counts.values()) > len(SITES) / len(members) / 2  # no member starved
    assert shares.owner("site-000", ()) is None


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param(("a", "b"), ("a", "b", "c"), id="join"),
        pytest.param(("a", "b", "c"), ("a", "c"), id="death"),
    ],
)
def test_a_change_moves_only_the_sites_it_must(before: tuple[str, ...], after: tuple[str, ...]) -> None:
    """A join takes sites only to the newcomer; a death moves only the dead member's."""
    for site in SITES:
        old, new = shares.owner(site, before), shares.owner(site, after)
        if old != new:
            assert new not in before or old not in after


def test_the_view_is_the_member_itself_and_its_live_peers_in_one_order() -> None:
    assert shares.view("b", ["c", "a", "b"]) == ("a", "b", "c")
    assert shares.view("b", []) == ("b",)


def test_a_join_step_by_step_never_leads_a_site_twice_and_ends_with_every_site_led() -> None:
    """b joins a: b acts under {a, b} at once but leads nothing while a's Lease says {a}; a moves
    to {a, b} (having stopped what it gives up) and only then does b lead its part."""
    ab = ("a", "b")
    steps = [
        # a alone
        (Share("a", ("a",)),),
        # b's Lease appears: b sees a (still saying {a}); a has not seen b yet
        (Share("a", ("a",), (Peer("b", ab),)), Share("b", ab, (Peer("a", ("a",)),))),
        # a adopts {a, b} (written after it let go); b has not read it yet
        (Share("a", ab, (Peer("b", ab),)), Share("b", ab, (Peer("a", ("a",)),))),
        # b reads a's new view
        (Share("a", ab, (Peer("b", ab),)), Share("b", ab, (Peer("a", ab),))),
    ]
    for replicas in steps:
        assert all(len(who) == 1 for who in leaders(*replicas).values())
    final = leaders(*steps[-1])
    assert len(final) == len(SITES) + 1 and {who[0] for who in final.values()} == {"a", "b"}


def test_a_death_hands_the_dead_replicas_sites_to_the_survivors() -> None:
    """c's Lease ran out (it stopped leading before that): a and b, each on its own, take its part."""
    abc = ("a", "b", "c")
    before = leaders(
        Share("a", abc, (Peer("b", abc), Peer("c", abc))), Share("b", abc, (Peer("a", abc), Peer("c", abc)))
    )
    ab = ("a", "b")
    # a noticed first: b still acts under {a, b, c}
    during = leaders(Share("a", ab, (Peer("b", abc),)), Share("b", abc, (Peer("a", abc),)))
    after = leaders(Share("a", ab, (Peer("b", ab),)), Share("b", ab, (Peer("a", ab),)))
    for held in (before, during, after):
        assert all(len(who) == 1 for who in held.values())
    assert len(after) == len(SITES) + 1
    assert len(before) < len(after)  # c's sites were led by nobody of a and b before


def test_a_replica_whose_lease_lapsed_leads_nothing() -> None:
    assert not any(shares.NOTHING.holds(s) for s in [*SITES, shares.SINGLETONS])
