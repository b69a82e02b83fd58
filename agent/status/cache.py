"""The status loop's cache: what it knows about each managed TCP and Kamaji's generated Secrets.

Owns the per-TCP ``Entry`` (the latest object, and what was last told to the hub about it) and
the Secrets that could belong to a TCP, fed by ``common.kube.informer`` through two ``Sink``s:
``Tcps`` and ``Secrets``. Every change that may alter a TCP's report calls ``changed(key)`` with
that TCP's key (the loop schedules a sync). Talks to nothing: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from agent.status import report
from agent.tcp import managed
from common import objects

Key = objects.Key
"""(namespace, name) of a TCP, or of a Secret in the Secret cache."""

Changed = Callable[[Key], None]


def version(obj: Mapping[str, Any] | None) -> str:
    """The object's resourceVersion ("" for none)."""
    return str(managed.meta(obj).get("resourceVersion") or "") if obj is not None else ""


@dataclass
class Entry:
    """What the loop knows about one managed TCP, and what it last told the hub about it."""

    tcp: dict[str, Any] | None = None
    """The latest object; None once it is gone (then ``gone`` says a Deleted is owed)."""
    gone: bool = False
    applied: managed.Applied | None = None
    """The last annotations seen: a Deleted names the owner of the TCP that disappeared."""
    uid: str = ""
    sent: report.Significant | None = None
    sealed: tuple[str, str] | None = None
    """(plaintext checksum, recipient key id) of the last SealedSecrets the server acknowledged."""
    last_publish: float = -math.inf
    failures: int = 0
    force: bool = False
    """Publish the Status even when unchanged (anti-entropy asked for it and it is not yet done)."""


class Tcps:
    """The managed TCPs of one site, by key: an informer ``Sink``."""

    def __init__(self, *, site: str, changed: Changed) -> None:
        self.site = site
        self.changed = changed
        self.entries: dict[Key, Entry] = {}

    def known(self) -> Iterator[Key]:
        # Only TCPs still present: one already gone is owed a Deleted, not another one.
        return (key for key, entry in self.entries.items() if entry.tcp is not None)

    def upsert(self, key: Key, obj: dict[str, Any]) -> None:
        entry = self.entries.setdefault(key, Entry())
        entry.tcp, entry.gone = obj, False
        entry.uid = str(managed.meta(obj).get("uid") or "")
        entry.applied = managed.applied(obj, site=self.site) or entry.applied
        self.changed(key)

    def delete(self, key: Key) -> None:
        entry = self.entries.get(key)
        if entry is None:
            return
        entry.tcp, entry.gone = None, True
        self.changed(key)

    def present(self) -> list[dict[str, Any]]:
        return [e.tcp for e in self.entries.values() if e.tcp is not None]

    def count(self) -> float:
        """How many managed TCPs are present (the ``managed_tcps`` gauge, read when scraped)."""
        return float(sum(1 for e in self.entries.values() if e.tcp is not None))


class Secrets:
    """The Secrets named like a TCP's generated ones, by key: an informer ``Sink``.

    A change reaches the TCP the Secret's name points at, if that TCP is known (``agent.tcp.managed``).
    """

    def __init__(self, tcps: Tcps) -> None:
        self.tcps = tcps
        self.objects: dict[Key, dict[str, Any]] = {}

    def known(self) -> Iterator[Key]:
        return iter(list(self.objects))

    def upsert(self, key: Key, obj: dict[str, Any]) -> None:
        if not report.tcp_names_of_secret(key[1]):
            return  # another Kamaji Secret: never reported
        before = self.objects.get(key)
        self.objects[key] = obj
        # A relist repeats every Secret: only a new version can change a report.
        if version(before) != version(obj):
            self._touched(key)

    def delete(self, key: Key) -> None:
        if not report.tcp_names_of_secret(key[1]):
            return
        self.objects.pop(key, None)
        self._touched(key)

    def owned(self, namespace: str, name: str, tcp: Mapping[str, Any]) -> dict[str, Any] | None:
        """The Secret ``name`` if it may be reported for ``tcp`` (``report.belongs``)."""
        secret = self.objects.get((namespace, name))
        return secret if secret is not None and report.belongs(secret, tcp) else None

    def _touched(self, key: Key) -> None:
        namespace, name = key
        for tcp_name in report.tcp_names_of_secret(name):
            if (namespace, tcp_name) in self.tcps.entries:
                self.tcps.changed((namespace, tcp_name))
