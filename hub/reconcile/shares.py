"""Which hub replica leads which site, when the sites are shared among replicas. Pure.

Each replica renews a Lease of its own and writes in it the members it acts under (its
``view``: every replica whose Lease it saw renewed lately, itself included). A site belongs,
in a view, to the member rendezvous hashing picks (``owner``): the highest hash of member and
site. That moves as few sites as can be when a member joins (only to it) or goes (only from
it). A replica leads a site (``Share.holds``) when it owns it in its own view *and* no other live
replica owns it in that replica's view, as its Lease last said. A replica stops leading what a
new view takes away before it writes that view: so a site moves only once its old leader said
it let go (or its Lease ran out, which it never lets happen while leading), and no site is ever
led by two replicas at once. ``SINGLETONS`` stands for what only one replica may run (it is no
site name: site names are DNS labels).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Final

SINGLETONS: Final = "#singletons"
"""Owned like a site: the replica that holds it runs the credential service and keeps the NATS
account (operator mode), which must have one writer."""


def _weight(member: str, site: str) -> bytes:
    return hashlib.blake2b(f"{member}\0{site}".encode(), digest_size=8).digest()


def owner(site: str, members: Collection[str]) -> str | None:
    """The member ``site`` belongs to among ``members`` (rendezvous hashing); None with none."""
    if not members:
        return None
    return max(members, key=lambda m: (_weight(m, site), m))


@dataclass(frozen=True)
class Peer:
    """Another live replica, as its Lease last said."""

    identity: str
    view: tuple[str, ...]
    """The members it acts under (empty: it holds nothing, e.g. not yet said)."""


@dataclass(frozen=True)
class Share:
    """What one replica leads: every site it owns in its view that no live peer owns in its own."""

    me: str
    view: tuple[str, ...]
    peers: tuple[Peer, ...] = ()
    _held: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)

    def holds(self, site: str) -> bool:
        held = self._held.get(site)
        if held is None:
            held = owner(site, self.view) == self.me and not any(
                owner(site, p.view) == p.identity for p in self.peers
            )
            self._held[site] = held
        return held


def view(me: str, live: Iterable[str]) -> tuple[str, ...]:
    """The members a replica acts under: itself and every live peer, in one order."""
    return tuple(sorted({me, *live}))


NOTHING: Final = Share(me="", view=())
"""The share of a replica that may lead nothing (its own Lease lapsed)."""
