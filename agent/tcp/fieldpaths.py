"""Paths to the fields of a TCP spec the agent sets, and their values as compared.

A path is the keys from ``spec`` down to one field the intent sets: a scalar, a list of
scalars, an empty map; and, into a list of maps, each item by its index (an ``int`` in the
path) down to the fields the intent sets in it, with the list's own path standing for its
length. So a list of containers compares as a real controller compares it: the fields we set,
item by item, and not what the CRD's defaulting added inside an item (a container port's
``protocol: TCP``, a probe's ``timeoutSeconds``); a changed value, a missing item or an extra
one is still a difference.

Ownership stays by list (``owned``: the path cut at its first index): the TCP's lists are
atomic, so a list is what the agent's apply owns and removes, and what ``agent.tcp.managed`` compares
with the TCP's managedFields. Pure: talks to nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

Path = tuple[str | int, ...]
"""Keys (``str``) and list indexes (``int``) from ``spec`` down to one compared field."""
Owned = tuple[str, ...]
"""Keys from ``spec`` down to one field the agent writes (and removes) whole."""

ABSENT: Final = {"$absent": True}


def _maps_inside(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(item, Mapping) for item in value)


def leaves(spec: Mapping[str, Any]) -> list[Path]:
    """The paths of the fields ``spec`` sets, sorted (see the module's docstring)."""
    out: list[Path] = []

    def visit(value: Any, here: Path) -> None:
        if value is None:
            return  # null is no value: a merge patch removes it, an API server prunes it
        if isinstance(value, Mapping) and value:
            for key, child in value.items():
                visit(child, (*here, str(key)))
            return
        out.append(here)
        if _maps_inside(value):
            for index, item in enumerate(value):
                visit(item, (*here, index))

    for key, value in spec.items():
        visit(value, (str(key),))
    return sort(out)


def sort(paths: Iterable[Path]) -> list[Path]:
    """``paths`` in a total order, whatever mix of keys and indexes a record holds."""
    return sorted(paths, key=lambda p: tuple((1, k, "") if isinstance(k, int) else (0, 0, k) for k in p))


def owned(paths: Iterable[Path]) -> list[Owned]:
    """The fields the agent writes and removes: each path cut before its first list index."""
    cut: set[Owned] = set()
    for path in paths:
        index = next((i for i, key in enumerate(path) if isinstance(key, int)), len(path))
        cut.add(tuple(str(k) for k in path[:index]))
    return sorted(cut)


def expanded(paths: Iterable[Path]) -> frozenset[Path]:
    """The list paths whose items ``paths`` compare one by one (the list itself: its length)."""
    return frozenset(p[:i] for p in paths for i, key in enumerate(p) if isinstance(key, int))


def value_at(spec: Any, path: Path, *, by_items: bool = False) -> Any:
    """The value at ``path`` as compared: ``ABSENT`` when missing or null, ``{}`` for any map
    (we own an empty map's presence, not what others put inside it), a list's length when
    ``by_items`` (its items are compared at their own paths)."""
    node = spec
    for key in path:
        if isinstance(key, int):
            if not isinstance(node, list) or not 0 <= key < len(node) or node[key] is None:
                return ABSENT
        elif not isinstance(node, Mapping) or node.get(key) is None:
            return ABSENT
        node = node[key]
    if isinstance(node, Mapping):
        return {}
    if by_items and isinstance(node, list):
        return {"$items": len(node)}
    if isinstance(node, float) and node.is_integer():
        return int(node)  # JSON has one number type: 2.0 from one writer is 2 from another
    return node


def differing(want: Mapping[str, Any], have: Mapping[str, Any], paths: Iterable[Path]) -> list[Path]:
    """The ``paths`` at which ``have`` does not hold what ``want`` holds."""
    paths = list(paths)
    lists = expanded(paths)
    return [
        p for p in paths if value_at(have, p, by_items=p in lists) != value_at(want, p, by_items=p in lists)
    ]
