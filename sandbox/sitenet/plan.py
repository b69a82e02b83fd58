"""Which addresses and names a site's network namespace gets: pure, tested by tables.

Each namespace takes a /23 of ``POOL`` (the shared address space of RFC 6598, which no host or
cloud network of this machine's kind uses): the lower /24 is the link (``.1`` this machine's end
of the veth pair, ``.2`` the namespace's, where its servers listen), the upper /24 is its
Services' network (the site's ``--service-cluster-ip-range``), routed into the namespace, so a
Service's cluster IP is an address this machine reaches. A /23 is free when no route of this
machine overlaps it.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["POOL", "Plan", "choose", "names"]

POOL = ipaddress.IPv4Network("100.64.0.0/10")


@dataclass(frozen=True)
class Plan:
    """One namespace's addresses."""

    block: ipaddress.IPv4Network
    """The /23 it takes."""

    @property
    def link(self) -> ipaddress.IPv4Network:
        return next(iter(self.block.subnets(new_prefix=24)))

    @property
    def services(self) -> ipaddress.IPv4Network:
        """The site's Service network (its cluster IPs), routed into the namespace."""
        return list(self.block.subnets(new_prefix=24))[1]

    @property
    def host_address(self) -> str:
        """This machine's end of the veth pair."""
        return str(self.link.network_address + 1)

    @property
    def address(self) -> str:
        """The namespace's end: where its servers listen for this machine."""
        return str(self.link.network_address + 2)


def choose(taken: Iterable[ipaddress.IPv4Network], *, rng: random.Random | None = None) -> Plan:
    """A /23 of ``POOL`` that overlaps none of ``taken`` (this machine's routes), at random so
    that two runs rarely even try the same one; ``ValueError`` when every one is taken."""
    rng = rng or random.Random()
    busy = [n for n in taken if n.overlaps(POOL)]
    count = 2 ** (23 - POOL.prefixlen)
    start = rng.randrange(count)
    for i in range(count):
        block = ipaddress.IPv4Network((int(POOL.network_address) + ((start + i) % count) * 512, 23))
        if not any(block.overlaps(n) for n in busy):
            return Plan(block)
    raise ValueError(f"every /23 of {POOL} overlaps a route of this machine")


def names(pid: int, index: int) -> tuple[str, str, str]:
    """The namespace's name and its veth pair's two ends for process ``pid``'s ``index``-th
    namespace. Interface names are at most 15 characters; the pid in every name tells which
    process made it, so a namespace left by a process that died can be found and removed."""
    tag = f"{pid:x}x{index:x}"
    if len(tag) > 12:
        raise ValueError(f"pid {pid} and index {index} do not fit an interface name")
    return f"kb-{tag}", f"kbh{tag}", f"kbn{tag}"
