"""The simulator's pool of control-plane addresses (what a LoadBalancer would hand out).

Owns which address each TenantControlPlane without ``spec.networkProfile.address`` gets. In
memory only, but it re-adopts the address a TCP already shows in its status, so a restarted
simulator keeps every endpoint stable (CAPI writes the endpoint once and never again). Pure: no
I/O; the simulator calls it from its single event loop.
"""

from __future__ import annotations

import ipaddress

__all__ = ["AddressPool", "PoolExhausted"]


class PoolExhausted(RuntimeError):
    """Every address of the pool is taken."""


class AddressPool:
    """Hands out the host addresses of ``network`` (e.g. ``10.240.0.0/16``) by owner (a TCP uid)."""

    def __init__(self, network: str = "10.240.0.0/16") -> None:
        self.network = ipaddress.ip_network(network)
        self._by_owner: dict[str, str] = {}
        self._owners: dict[str, str] = {}
        self._hosts = self.network.hosts()

    def __len__(self) -> int:
        return len(self._by_owner)

    def address_for(self, owner: str, *, hint: str | None = None) -> str:
        """The owner's address; a new one on first call, ``hint`` if it is in the pool and free."""
        known = self._by_owner.get(owner)
        if known is not None:
            return known
        adopted = self._adoptable(hint) if hint is not None else None
        address = adopted if adopted is not None else self._next_free()
        self._by_owner[owner] = address
        self._owners[address] = owner
        return address

    def release(self, owner: str) -> None:
        address = self._by_owner.pop(owner, None)
        if address is not None:
            del self._owners[address]

    def _adoptable(self, candidate: str) -> str | None:
        """``candidate`` normalised, when it is a free host address of the pool; else None."""
        try:
            address = ipaddress.ip_address(candidate)
        except ValueError:
            return None
        text = str(address)
        if address not in self.network or text in self._owners:
            return None
        if address in (self.network.network_address, self.network.broadcast_address):
            return None
        return text

    def _next_free(self) -> str:
        # Walk forward once through the network; after wrapping, scan for released addresses.
        for host in self._hosts:
            if str(host) not in self._owners:
                return str(host)
        for host in self.network.hosts():
            if str(host) not in self._owners:
                self._hosts = self.network.hosts()
                return str(host)
        raise PoolExhausted(f"no free address left in {self.network}")
