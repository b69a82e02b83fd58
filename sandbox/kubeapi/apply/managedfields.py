"""managedFields: which field manager owns which fields, and server-side apply on top of it.

Owns the two ways a write changes the field sets of ``metadata.managedFields`` (their stored
form is ``fieldsets``'), as the real server's structured-merge-diff does:

- ``updated``: an Update (create, PUT, merge/JSON patch) by a manager takes the fields it added
  or changed away from every other manager; removed fields leave every manager.
- ``applied``: an Apply merges the manager's configuration into the object, refuses (409) a
  changed value of a field another manager owns unless forced (then that manager loses it),
  and removes what the manager applied before and no longer applies, unless someone else owns it.

Lists are atomic (one leaf) unless their schema says ``x-kubernetes-list-type: set``; list-maps
are atomic too (a documented deviation). Pure: no clock (``now`` is passed in).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Final

from sandbox.kubeapi import errors
from sandbox.kubeapi.apply.fieldsets import Entry, Path, decode, encode

Schema = Mapping[str, Any]

_NODE: Final = object()  # a map or set-list node, among an object's members
_META_FIELDS: Final = ("labels", "annotations", "finalizers", "ownerReferences")
_META_SCHEMA: Final = {"properties": {"finalizers": {"x-kubernetes-list-type": "set"}}}


def _child(schema: Schema, key: str) -> Schema:
    props = schema.get("properties") or {}
    if key in props:
        return dict(props[key])
    more = schema.get("additionalProperties")
    return dict(more) if isinstance(more, Mapping) else {}


def _item_key(item: Any) -> str:
    return "v:" + json.dumps(item, separators=(",", ":"), ensure_ascii=False)


def members(value: Any, schema: Schema, *, leaves_only: bool, here: Path = ()) -> dict[Path, Any]:
    """Every member path of ``value`` and its value (``_NODE`` for a map or set-list node).

    ``leaves_only``: what an Apply owns (scalars, atomic lists, empty maps, set items), not the
    maps and lists above them."""
    out: dict[Path, Any] = {}
    if isinstance(value, Mapping) and value and schema.get("x-kubernetes-map-type") != "atomic":
        if here not in ((), ("f:metadata",)) and not leaves_only:
            out[here] = _NODE
        for key, child in value.items():
            out |= members(child, _child(schema, key), leaves_only=leaves_only, here=(*here, f"f:{key}"))
    elif isinstance(value, list) and value and schema.get("x-kubernetes-list-type") == "set":
        if not leaves_only:
            out[here] = _NODE
        for item in value:
            out[(*here, _item_key(item))] = item
    elif here:
        out[here] = value
    return out


def tracked(obj: Mapping[str, Any] | None, *, subresource: str = "") -> dict[str, Any]:
    """The part of an object whose fields are owned: the status for the status subresource;
    otherwise all but apiVersion, kind, status and the server's metadata."""
    obj = obj or {}
    if subresource:
        return {k: v for k, v in obj.items() if k == subresource}
    meta = obj.get("metadata") or {}
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    kept = {k: meta[k] for k in _META_FIELDS if meta.get(k) not in (None, {}, [])}
    if kept:
        out["metadata"] = kept
    return out


def with_meta(schema: Schema) -> dict[str, Any]:
    """``schema`` (a CRD version's openAPIV3Schema, or {}) with what metadata's lists are."""
    props = dict(schema.get("properties") or {})
    props["metadata"] = _META_SCHEMA
    return {**schema, "properties": props}


def updated(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    managed: Any,
    *,
    manager: str,
    schema: Schema,
    api_version: str,
    now: str,
    subresource: str = "",
) -> list[dict[str, Any]]:
    """``managed`` after ``manager``'s Update of ``old`` (None: a create) into ``new``."""
    before = members(tracked(old, subresource=subresource), schema, leaves_only=False)
    after = members(tracked(new, subresource=subresource), schema, leaves_only=False)
    removed = before.keys() - after.keys()
    changed = {p for p, v in after.items() if p not in before or (v is not _NODE and before[p] != v)}
    entries = decode(managed)
    if not changed and not removed:
        return encode(entries)
    mine = _entry(entries, manager, "Update", subresource, api_version=api_version)
    for e in entries:
        if e is not mine:
            e.fields -= changed
        e.fields -= removed
    mine.fields = (mine.fields | changed) - removed
    if changed:
        mine.time, mine.api_version = now, api_version
    return encode(entries)


def _entry(
    entries: list[Entry], manager: str, operation: str, subresource: str, *, api_version: str
) -> Entry:
    for e in entries:
        if (e.manager, e.operation, e.subresource) == (manager, operation, subresource):
            return e
    entries.append(Entry(manager, operation, api_version, "", set(), subresource))
    return entries[-1]


def applied(
    live: Mapping[str, Any] | None,
    config: Mapping[str, Any],
    managed: Any,
    *,
    manager: str,
    force: bool,
    schema: Schema,
    api_version: str,
    now: str,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The object and its managedFields after ``manager`` applies ``config`` to ``live``.

    Raises 409 Conflict, worded as the real server words it, when another manager owns a field
    whose value ``config`` changes and ``force`` is false."""
    want = members(tracked(config), schema, leaves_only=True)
    have = members(tracked(live), schema, leaves_only=False)
    entries = decode(managed)
    mine = _entry(entries, manager, "Apply", "", api_version=api_version)
    conflicts: list[tuple[Entry, list[Path]]] = []
    for e in entries:
        if e is mine or e.subresource:
            continue
        lost = sorted(p for p in e.fields & want.keys() if have.get(p, _NODE) != want[p])
        if lost:
            conflicts.append((e, lost))
    if conflicts and not force:
        raise conflict(conflicts)
    for e, lost in conflicts:
        e.fields -= set(lost)
    others = set().union(*(e.fields for e in entries if e is not mine))
    kept = want.keys() | others
    # A map node owned before (an Update's ``.``, handed to this Apply) stays while anything
    # below it is still owned, as the real server adds back every owned item after pruning.
    below = {q[:n] for q in kept for n in range(1, len(q))}
    gone = mine.fields - kept - below
    obj = _merge(copy.deepcopy(dict(live or {})), config, schema)
    for path in sorted(gone, key=len, reverse=True):
        _remove(obj, path, others)
    mine.fields, mine.time, mine.api_version = set(want), now, api_version
    return obj, encode(entries)


def _merge(live: Any, config: Any, schema: Schema) -> Any:
    if (
        isinstance(live, dict)
        and isinstance(config, Mapping)
        and schema.get("x-kubernetes-map-type") != "atomic"
    ):
        for key, value in config.items():
            live[key] = _merge(live.get(key), value, _child(schema, key))
        return live
    if isinstance(live, list) and isinstance(config, list) and schema.get("x-kubernetes-list-type") == "set":
        return [*live, *(item for item in config if item not in live)]
    return copy.deepcopy(config)


def _remove(obj: dict[str, Any], path: Path, owned: set[Path]) -> None:
    """Remove the member at ``path``, then the maps above it it leaves empty that nobody owns."""
    trail: list[tuple[Any, str]] = []
    node: Any = obj
    for key in path[:-1]:
        name = key[2:]
        if not isinstance(node, dict) or name not in node:
            return
        trail.append((node, name))
        node = node[name]
    last = path[-1]
    if last.startswith("v:") and isinstance(node, list):
        item = json.loads(last[2:])
        node[:] = [i for i in node if i != item]
    elif isinstance(node, dict):
        node.pop(last[2:], None)
    for depth in range(len(trail) - 1, -1, -1):
        parent, name = trail[depth]
        if parent[name] in ({}, []) and path[: depth + 1] not in owned and depth > 0:
            del parent[name]
        else:
            break


def dotted(path: Path) -> str:
    """A path as the real server's conflict messages show it: ``.spec.a[="x"]``."""
    return "".join(f"[={k[2:]}]" if k.startswith("v:") else f".{k[2:]}" for k in path)


def conflict(found: list[tuple[Entry, list[Path]]]) -> errors.ApiError:
    def who(e: Entry) -> str:
        return f'"{e.manager}"' + (f" using {e.api_version}" if e.operation == "Update" else "")

    return errors.apply_conflicts([(who(e), [dotted(p) for p in paths]) for e, paths in found])
