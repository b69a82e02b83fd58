"""The change log of one cluster: a bounded history window and the live watchers it feeds.

Owns ``Entry`` (a stored object and its cached JSON encoding: stored objects are never mutated,
so one encoding serves every reader), ``Event``, ``Filter``, ``Watcher`` and ``History``. The
history keeps the last ``capacity`` events of all resources; a watch or a paginated list from a
resourceVersion older than the window is answered 410 Expired, as a compacted etcd would.
Talks to asyncio queues only; the HTTP streaming lives in ``serving.streaming``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from sandbox.kubeapi import errors
from sandbox.kubeapi.state import selectors

ResourceKey = tuple[str, str]
_NO_LABELS = selectors.LabelSelector()
_NO_FIELDS = selectors.FieldSelector()


class Entry:
    """A stored object (treat ``obj`` as frozen) with its JSON bytes, encoded on first use.

    Once an object is replaced, the history still holds its old Entry (for replays, selector
    transitions and list snapshots): ``compact`` keeps only the bytes, about a fifth of the
    memory of the dicts, and ``obj`` decodes them again on the rare read.
    """

    __slots__ = ("_obj", "_raw")

    def __init__(self, obj: dict[str, Any]) -> None:
        self._obj: dict[str, Any] | None = obj
        self._raw: bytes | None = None

    @property
    def obj(self) -> dict[str, Any]:
        if self._obj is None:
            assert self._raw is not None
            self._obj = msgspec.json.decode(self._raw)
        return self._obj

    @property
    def raw(self) -> bytes:
        if self._raw is None:
            self._raw = msgspec.json.encode(self._obj)
        return self._raw

    def compact(self) -> None:
        self.raw  # noqa: B018 - encode before dropping the dicts
        self._obj = None


@dataclass(slots=True)
class Event:
    rv: int
    type: str  # ADDED, MODIFIED or DELETED
    key: ResourceKey
    entry: Entry
    old: Entry | None = None

    @property
    def namespace(self) -> str:
        return str(self.entry.obj["metadata"].get("namespace", ""))


@dataclass(frozen=True)
class Filter:
    """Which objects of one resource a list or watch wants."""

    key: ResourceKey
    namespace: str | None = None
    labels: selectors.LabelSelector = _NO_LABELS
    fields: selectors.FieldSelector = _NO_FIELDS

    def matches(self, obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        if self.namespace is not None and meta.get("namespace", "") != self.namespace:
            return False
        if not self.labels.empty and not self.labels.matches(meta.get("labels")):
            return False
        return not self.fields.requirements or self.fields.matches(obj)


@dataclass(eq=False)
class Watcher:
    """One open watch: events that pass its filter, queued for the HTTP stream."""

    filter: Filter
    capacity: int
    queue: asyncio.Queue[tuple[str, Entry] | None] = field(init=False)
    overflowed: bool = False

    def __post_init__(self) -> None:
        self.queue = asyncio.Queue()

    def offer(self, event: Event) -> None:
        """Queue ``event`` as this watcher sees it (a selector change turns MODIFIED into ADDED/DELETED)."""
        if self.overflowed:
            return
        kind = self.translate(event)
        if kind is None:
            return
        if self.queue.qsize() >= self.capacity:
            # A consumer this far behind is cut off, as the real apiserver does; it re-watches.
            self.overflowed = True
            self.queue.put_nowait(None)
            return
        self.queue.put_nowait((kind, event.entry))

    def translate(self, event: Event) -> str | None:
        now = self.filter.matches(event.entry.obj)
        if event.type != "MODIFIED":
            return event.type if now else None
        before = event.old is not None and self.filter.matches(event.old.obj)
        if now:
            return "MODIFIED" if before else "ADDED"
        return "DELETED" if before else None

    def close(self) -> None:
        self.queue.put_nowait(None)


class History:
    """The bounded event window plus the watchers, indexed by resource for cheap fan-out."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.events: deque[Event] = deque(maxlen=capacity)
        #: Events with rv <= compacted are gone; resuming from an rv below it is 410 Expired.
        self.compacted = 0
        self._watchers: dict[ResourceKey, set[Watcher]] = {}

    def record(self, event: Event) -> None:
        if len(self.events) == self.capacity:
            self.compacted = self.events[0].rv
        self.events.append(event)
        for watcher in self._watchers.get(event.key, ()):
            watcher.offer(event)

    def check(self, rv: int) -> None:
        """Raise 410 Expired when events after ``rv`` are no longer all in the window."""
        if rv < self.compacted:
            raise errors.expired(f"too old resource version: {rv} ({self.compacted})")

    def since(self, rv: int, key: ResourceKey) -> Iterable[Event]:
        """Events of ``key`` with a resourceVersion above ``rv`` (call ``check`` first)."""
        if not self.events or self.events[-1].rv <= rv:
            return []
        return [e for e in self.events if e.rv > rv and e.key == key]

    def newer_than(self, rv: int) -> list[Event]:
        """All events above ``rv``, oldest first (for list snapshots)."""
        return [e for e in self.events if e.rv > rv]

    def subscribe(self, watcher: Watcher) -> None:
        self._watchers.setdefault(watcher.filter.key, set()).add(watcher)

    def unsubscribe(self, watcher: Watcher) -> None:
        self._watchers.get(watcher.filter.key, set()).discard(watcher)

    def close_all(self, key: ResourceKey | None = None) -> None:
        """End the watches of ``key`` (every watch when None): e.g. when a CRD is deleted."""
        keys = list(self._watchers) if key is None else [key]
        for k in keys:
            for watcher in self._watchers.pop(k, set()):
                watcher.close()

    @property
    def watcher_count(self) -> int:
        return sum(len(ws) for ws in self._watchers.values())
