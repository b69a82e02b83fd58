"""A map from a key to the few values filed under it, for indexes that hold one value per key
almost always (the RKCPs claiming a TenantControlPlane, the RKCPs of a Cluster): a lone value is
kept as itself and a set made only when a second one comes. A set per key costs 216 bytes, ten
times the entry. Values are never sets themselves. Pure.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Hashable)


class MultiMap(Generic[K, V]):
    def __init__(self) -> None:
        self._d: dict[K, V | set[V]] = {}

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key: object) -> bool:
        return key in self._d

    def __iter__(self) -> Iterator[K]:
        return iter(self._d)

    def add(self, key: K, value: V) -> None:
        held = self._d.get(key)
        if held is None:
            self._d[key] = value
        elif isinstance(held, set):
            held.add(value)
        elif held != value:
            self._d[key] = {held, value}

    def discard(self, key: K, value: V) -> bool:
        """Take ``value`` from under ``key``; whether ``key`` holds nothing now."""
        held = self._d.get(key)
        if held is None:
            return True
        if isinstance(held, set):
            held.discard(value)
            if len(held) > 1:
                return False
            if held:
                self._d[key] = next(iter(held))
                return False
        elif held != value:
            return False
        del self._d[key]
        return True

    def get(self, key: K) -> tuple[V, ...]:
        """The values under ``key`` (empty when none)."""
        held = self._d.get(key)
        if held is None:
            return ()
        if isinstance(held, set):
            return tuple(held)
        return (held,)
