"""URL paths of the Kubernetes REST API → what they address.

Owns the parsing of ``/api/v1/...`` and ``/apis/<group>/<version>/...`` paths (namespaced and
cluster-scoped collections, objects, subresources, the legacy ``/watch/`` prefix) into a
``Target``. Pure: it does not know which resources exist.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    group: str
    version: str
    plural: str
    namespace: str | None = None  # None: not namespace-qualified (cluster-scoped, or all namespaces)
    name: str = ""
    subresource: str = ""
    legacy_watch: bool = False


def parse(path: str) -> Target | None:
    """A resource address, or None for anything else (discovery, unknown paths)."""
    segs = [s for s in path.split("/") if s]
    if len(segs) >= 3 and segs[0] == "api" and segs[1] == "v1":
        group, version, rest = "", "v1", segs[2:]
    elif len(segs) >= 4 and segs[0] == "apis":
        group, version, rest = segs[1], segs[2], segs[3:]
    else:
        return None
    legacy_watch = bool(rest) and rest[0] == "watch"
    if legacy_watch:
        rest = rest[1:]
    if (
        len(rest) >= 3
        and rest[0] == "namespaces"
        and not (len(rest) == 3 and rest[2] in ("status", "finalize"))
    ):
        namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            return None
        return Target(group, version, rest[0], namespace, *_tail(rest), legacy_watch=legacy_watch)
    if not rest or len(rest) > 3:
        return None
    return Target(group, version, rest[0], None, *_tail(rest), legacy_watch=legacy_watch)


def _tail(rest: list[str]) -> tuple[str, str]:
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    return name, sub
