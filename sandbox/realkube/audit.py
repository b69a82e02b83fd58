"""What a user did on a real cluster, read from kube-apiserver's audit log (``Cluster.audit_log``).

Pure: lines in, sets out. A request is ``Use(group, resource, verb)`` with ``resource`` as RBAC
names it (``sites/status`` for a subresource); ``refused`` are those the authorizer answered 403;
``where`` says in which namespace each was made ("": cluster-wide, or a cluster-scoped kind).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Use", "expand", "refused", "used", "where"]


@dataclass(frozen=True, order=True)
class Use:
    group: str
    resource: str
    verb: str

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}{'.' + self.group if self.group else ''}"


def _uses(lines: Iterable[str], user: str, *, codes: tuple[int, ...] | None) -> set[Use]:
    return {use for use, _ in _scoped(lines, user, codes=codes)}


def _scoped(lines: Iterable[str], user: str, *, codes: tuple[int, ...] | None) -> set[tuple[Use, str]]:
    found: set[tuple[Use, str]] = set()
    for line in lines:
        if not line.strip():
            continue
        event = json.loads(line)
        ref = event.get("objectRef")
        if event.get("user", {}).get("username") != user or not ref:
            continue  # another user's, or a non-resource URL (/version, discovery)
        code = (event.get("responseStatus") or {}).get("code")
        if codes is not None and code not in codes:
            continue
        resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        found.add((Use(ref.get("apiGroup", ""), resource, event["verb"]), ref.get("namespace", "")))
    return found


def used(lines: Iterable[str], user: str) -> set[Use]:
    """Every (group, resource, verb) ``user`` asked for, allowed or not."""
    return _uses(lines, user, codes=None)


def refused(lines: Iterable[str], user: str) -> set[Use]:
    """What ``user`` was forbidden (403): a right its RBAC lacks."""
    return _uses(lines, user, codes=(403,))


def where(lines: Iterable[str], user: str) -> set[tuple[Use, str]]:
    """Every (use, namespace) of ``user``'s requests, allowed or not; "" for a request made
    cluster-wide (a list or watch of every namespace) or of a cluster-scoped kind."""
    return _scoped(lines, user, codes=None)


def expand(rules: Iterable[tuple[str, str, tuple[str, ...]]]) -> set[Use]:
    """RBAC rules as ``(group, resource, verbs)`` (``hub.rbac.RULES``), one ``Use`` per verb."""
    return {Use(group, resource, verb) for group, resource, verbs in rules for verb in verbs}
