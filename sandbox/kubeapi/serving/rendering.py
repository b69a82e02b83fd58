"""Response bodies: objects, lists, Tables and watch events in the version the client asked for.

Owns content negotiation of responses (JSON, or a ``meta.k8s.io`` Table when the Accept header
asks ``as=Table``), serving an object stored in its storage version under the requested version
(custom resources have no conversion webhook: only ``apiVersion`` changes), and encoding list
and watch-event bytes around the objects' cached JSON. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from sandbox.kubeapi.kinds import resources, tables
from sandbox.kubeapi.state import watching


@dataclass(frozen=True)
class View:
    """How one request wants objects rendered."""

    rtype: resources.ResourceType
    version: str
    table: bool = False
    include: str = "Metadata"  # Table rows: None, Metadata or Object

    @property
    def api_version(self) -> str:
        return self.rtype.api_version(self.version)

    @property
    def converts(self) -> bool:
        return self.version != self.rtype.storage_version


def wants_table(accept: str) -> bool:
    return any("as=Table" in part and "g=meta.k8s.io" in part for part in accept.split(","))


def as_version(view: View, entry: watching.Entry) -> dict[str, Any]:
    if not view.converts:
        return entry.obj
    return {**entry.obj, "apiVersion": view.api_version}


def object_bytes(view: View, entry: watching.Entry) -> bytes:
    if view.table:
        meta = {"resourceVersion": entry.obj["metadata"]["resourceVersion"]}
        return msgspec.json.encode(
            tables.table(
                tables.columns(view.rtype, view.version),
                [as_version(view, entry)],
                include=view.include,
                metadata=meta,
            )
        )
    return entry.raw if not view.converts else msgspec.json.encode(as_version(view, entry))


def list_bytes(
    view: View, entries: list[watching.Entry], *, rv: int, continue_token: str, remaining: int | None
) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if continue_token:
        meta["continue"] = continue_token
    if remaining is not None:
        meta["remainingItemCount"] = remaining
    if view.table:
        objs = [as_version(view, e) for e in entries]
        cols = tables.columns(view.rtype, view.version)
        return msgspec.json.encode(tables.table(cols, objs, include=view.include, metadata=meta))
    head = msgspec.json.encode(
        {"kind": view.rtype.list_kind, "apiVersion": view.api_version, "metadata": meta}
    )
    items = b",".join(object_bytes(view, e) for e in entries)
    return head[:-1] + b',"items":[' + items + b"]}"


def event_bytes(view: View, kind: str, entry: watching.Entry, *, headers: bool = False) -> bytes:
    if view.table:
        cols = tables.columns(view.rtype, view.version)
        meta = {"resourceVersion": entry.obj["metadata"]["resourceVersion"]}
        body = tables.table(
            cols, [as_version(view, entry)], include=view.include, metadata=meta, headers=headers
        )
        return msgspec.json.encode({"type": kind, "object": body}) + b"\n"
    return b'{"type":"' + kind.encode() + b'","object":' + object_bytes(view, entry) + b"}\n"


def bookmark_bytes(view: View, rv: int, *, initial_events_end: bool = False) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if initial_events_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    obj = {"kind": view.rtype.kind, "apiVersion": view.api_version, "metadata": meta}
    return msgspec.json.encode({"type": "BOOKMARK", "object": obj}) + b"\n"


def error_event_bytes(status: dict[str, Any]) -> bytes:
    return msgspec.json.encode({"type": "ERROR", "object": status}) + b"\n"


def scale_of(rtype: resources.ResourceType, entry: watching.Entry) -> dict[str, Any]:
    """The autoscaling/v1 Scale view of a custom object with a scale subresource."""
    assert rtype.scale is not None
    obj = entry.obj
    meta = obj["metadata"]
    status: dict[str, Any] = {"replicas": _dig(obj, rtype.scale.status_replicas_path) or 0}
    if rtype.scale.label_selector_path:
        selector = _dig(obj, rtype.scale.label_selector_path)
        if selector:
            status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": _dig(obj, rtype.scale.spec_replicas_path) or 0},
        "status": status,
    }


def _dig(obj: dict[str, Any], path: str) -> Any:
    return tables.dig(obj, path.strip("."))


def set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    parts = path.strip(".").split(".")
    current = obj
    for part in parts[:-1]:
        nxt = current.get(part)
        if not isinstance(nxt, dict):
            nxt = current[part] = {}
        current = nxt
    current[parts[-1]] = value
