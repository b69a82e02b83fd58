"""A site namespace's addresses: a free /23 of the shared address space, split in link and Services."""

from __future__ import annotations

import ipaddress
import random

import pytest

from sandbox.sitenet import plan


def net(text: str) -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(text)


@pytest.mark.parametrize(
    ("block", "link", "services", "host", "inside"),
    [
        ("100.64.0.0/23", "100.64.0.0/24", "100.64.1.0/24", "100.64.0.1", "100.64.0.2"),
        ("100.127.254.0/23", "100.127.254.0/24", "100.127.255.0/24", "100.127.254.1", "100.127.254.2"),
    ],
)
def test_a_plan_splits_its_block_into_link_and_services(
    block: str, link: str, services: str, host: str, inside: str
) -> None:
    p = plan.Plan(net(block))
    assert (p.link, p.services, p.host_address, p.address) == (net(link), net(services), host, inside)


@pytest.mark.parametrize(
    "taken",
    [
        [],
        [net("10.0.0.0/8"), net("192.0.2.0/24")],
        [net("100.64.0.0/11")],
        [net("100.64.0.0/11"), net("100.96.0.0/12"), net("100.112.0.0/13"), net("100.120.0.0/14")],
        [net("100.64.0.5/32")],
    ],
)
def test_the_chosen_block_is_in_the_pool_and_overlaps_no_route(taken: list[ipaddress.IPv4Network]) -> None:
    for seed in range(20):
        p = plan.choose(taken, rng=random.Random(seed))
        assert p.block.prefixlen == 23 and p.block.subnet_of(plan.POOL)
        assert not any(p.block.overlaps(t) for t in taken)


def test_the_one_free_block_is_found_wherever_the_search_starts() -> None:
    free = net("100.100.2.0/23")
    taken = [b for b in plan.POOL.subnets(new_prefix=23) if b != free]
    # Collapsed, as a routing table would hold them.
    routes = list(ipaddress.collapse_addresses(taken))
    for seed in range(5):
        assert plan.choose(routes, rng=random.Random(seed)).block == free


def test_a_full_pool_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match=r"100\.64\.0\.0/10"):
        plan.choose([net("100.64.0.0/10")])


@pytest.mark.parametrize(
    ("pid", "index", "expected"),
    [
        (1, 0, ("kb-1x0", "kbh1x0", "kbn1x0")),
        (4194304, 3, ("kb-400000x3", "kbh400000x3", "kbn400000x3")),
    ],
)
def test_names_carry_the_pid_and_fit_an_interface(
    pid: int, index: int, expected: tuple[str, str, str]
) -> None:
    got = plan.names(pid, index)
    assert got == expected
    assert all(len(n) <= 15 for n in got[1:])


def test_a_name_that_would_not_fit_is_refused() -> None:
    with pytest.raises(ValueError, match="interface name"):
        plan.names(2**40, 0)
