"""Consistent lists: one resource's objects as they were at a resourceVersion, in pages.

Owns ``Page`` and the two steps of a list: rewind the current objects through the change log
to the requested resourceVersion (``snapshot``; older than the history window is 410 Expired,
as a compacted etcd would answer), then cut one page in etcd's key order with a
``continue`` token that pins that resourceVersion (``page``), in the real server's order
(``order``). Called by ``store``; reads
``watching.History``. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from sandbox.kubeapi import errors, options
from sandbox.kubeapi.state import watching
from sandbox.kubeapi.state.owners import ObjectKey

View = dict[ObjectKey, watching.Entry]


@dataclass
class Page:
    entries: list[watching.Entry]
    rv: int
    continue_token: str = ""
    remaining: int | None = None


def order(okey: ObjectKey) -> str:
    """Where an object sorts in a list: by its etcd key, ``<namespace>/<name>``, byte by byte (so
    namespace ``a-b`` comes before ``a``: "-" sorts before "/")."""
    return f"{okey[0]}/{okey[1]}"


def resume(continue_token: str, history: watching.History) -> tuple[int, ObjectKey]:
    """The resourceVersion and last key of the page before; 410 when history no longer reaches it."""
    rv, start = options.decode_continue(continue_token)
    if rv < history.compacted:
        raise errors.expired(
            "The provided continue parameter is too old to display a consistent list result. "
            "You can start a new list without the continue parameter."
        )
    return rv, start


def snapshot(current: View, history: watching.History, key: watching.ResourceKey, rv: int) -> View:
    """``current`` (the objects now, at ``history``'s newest rv) as it was at ``rv``."""
    history.check(rv)
    view = dict(current)
    for event in reversed(history.newer_than(rv)):
        if event.key != key:
            continue
        meta = event.entry.obj["metadata"]
        okey = (meta.get("namespace", ""), meta["name"])
        if event.type == "ADDED":
            view.pop(okey, None)
        elif event.old is not None:
            view[okey] = event.old
    return view


def page(view: View, filter_: watching.Filter, *, rv: int, limit: int, start: ObjectKey | None) -> Page:
    """The first ``limit`` (0: all) matching objects after ``start``, with a token for the rest."""
    name = filter_.fields.exact_name()
    keys = [k for k in view if k[1] == name] if name is not None else list(view)
    keys.sort(key=order)
    if start is not None:
        keys = [k for k in keys if order(k) > order(start)]
    items: list[watching.Entry] = []
    last: ObjectKey | None = None
    for index, okey in enumerate(keys):
        entry = view[okey]
        if not filter_.matches(entry.obj):
            continue
        if limit and len(items) == limit:
            filtered = not filter_.labels.empty or bool(filter_.fields.requirements)
            token = options.encode_continue(rv, last) if last is not None else ""
            return Page(items, rv, token, None if filtered else len(keys) - index)
        items.append(entry)
        last = okey
    return Page(items, rv)
