"""The informer: keep a cache of one resource in step with the API, on top of ``watching.stream``.

On every (re)list it drops what the cache holds in the listed scope that is no longer there (it
was deleted while we were not watching), then upserts every listed object; on a watch event it
upserts (ADDED, MODIFIED) or deletes (DELETED). What a "cache" is, is the caller's: the hub's
object caches and indexes, the agent's TCP and Secret caches, the sandbox's Kamaji workers all
implement ``Sink``. Runs until cancelled; a failing API is retried by ``watching.stream``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from common import objects
from common.kube import watching
from common.kube.answers import WatchEvent
from common.kube.client import Kube
from common.kube.resources import Resource

Key = objects.Key


class Sink(Protocol):
    """What an informer keeps in step: the keys it holds, and a way to add, replace and drop one."""

    def known(self) -> Iterable[Key]:
        """Every key held now (an informer with a namespace drops only the keys in it)."""
        ...

    def upsert(self, key: Key, obj: dict[str, Any]) -> None: ...

    def delete(self, key: Key) -> None: ...


def in_scope(key: Key, namespace: str | None) -> bool:
    return namespace is None or key[0] == namespace


def relisted(sink: Sink, items: Iterable[Mapping[str, Any]], namespace: str | None) -> None:
    """Apply a full list of ``namespace`` (None: every namespace) to ``sink``."""
    fresh = {objects.key(o): o for o in items}
    for gone in [k for k in sink.known() if in_scope(k, namespace) and k not in fresh]:
        sink.delete(gone)
    for key, obj in fresh.items():
        sink.upsert(key, dict(obj))


def event(sink: Sink, item: WatchEvent) -> None:
    key = objects.key(item.object)
    if item.type == "DELETED":
        sink.delete(key)
    else:
        sink.upsert(key, item.object)


async def inform(
    kube: Kube,
    r: Resource,
    sink: Sink,
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
    synced: Callable[[], None] | None = None,
    watch_timeout: int = 300,
) -> None:
    """Keep ``sink`` in step with ``r`` (in ``namespace``, matching ``label_selector``) forever;
    ``synced`` is called after each (re)list has been applied."""
    items = watching.stream(
        kube, r, namespace=namespace, label_selector=label_selector, watch_timeout=watch_timeout
    )
    async with contextlib.aclosing(items):
        async for item in items:
            if isinstance(item, watching.Synced):
                relisted(sink, item.items, namespace)
                del item  # the sink keeps what it needs: the listing goes before the next event
                if synced is not None:
                    synced()
            else:
                event(sink, item)
