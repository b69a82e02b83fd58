"""sandbox.kamaji.addresses: the simulator's endpoint address pool."""

from __future__ import annotations

import pytest

from sandbox.kamaji.addresses import AddressPool, PoolExhausted


def test_owners_get_distinct_stable_addresses() -> None:
    pool = AddressPool("10.240.0.0/16")
    first, second = pool.address_for("a"), pool.address_for("b")
    assert (first, second) == ("10.240.0.1", "10.240.0.2")
    assert pool.address_for("a") == first
    assert len(pool) == 2


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        ("10.240.3.4", "10.240.3.4"),
        ("10.241.0.9", "10.240.0.1"),
        ("not-an-ip", "10.240.0.1"),
        ("10.240.0.0", "10.240.0.1"),
    ],
    ids=["free address of the pool is re-adopted", "outside the pool", "not an address", "network address"],
)
def test_hint(hint: str, expected: str) -> None:
    assert AddressPool("10.240.0.0/16").address_for("a", hint=hint) == expected


def test_a_taken_hint_is_not_shared() -> None:
    pool = AddressPool("10.240.0.0/16")
    taken = pool.address_for("a")
    assert pool.address_for("b", hint=taken) != taken


def test_released_addresses_are_reused_when_the_pool_runs_out() -> None:
    pool = AddressPool("192.0.2.0/30")  # two hosts
    assert [pool.address_for("a"), pool.address_for("b")] == ["192.0.2.1", "192.0.2.2"]
    with pytest.raises(PoolExhausted):
        pool.address_for("c")
    pool.release("a")
    assert pool.address_for("c") == "192.0.2.1"
