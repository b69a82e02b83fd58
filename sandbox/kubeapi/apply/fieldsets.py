"""managedFields as stored: one ``Entry`` per manager, operation and subresource, each with its
field set (fieldsV1: ``f:<name>`` for a map member, ``v:<json>`` for an item of a ``set`` list,
``.`` for a node that is itself a member). How writes change them is ``managedfields``'. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Path = tuple[str, ...]


@dataclass
class Entry:
    manager: str
    operation: str
    api_version: str
    time: str
    fields: set[Path]
    subresource: str = ""

    def encode(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields_v1(self.fields),
        }
        if self.subresource:
            out["subresource"] = self.subresource
        return out


def decode(managed: Any) -> list[Entry]:
    """The entries of a stored ``managedFields`` (anything unreadable is skipped)."""
    out = []
    for e in managed if isinstance(managed, list) else ():
        if isinstance(e, Mapping) and e.get("manager") is not None:
            out.append(
                Entry(
                    manager=str(e.get("manager")),
                    operation=str(e.get("operation") or "Update"),
                    api_version=str(e.get("apiVersion") or ""),
                    time=str(e.get("time") or ""),
                    fields=paths_of(e.get("fieldsV1") or {}),
                    subresource=str(e.get("subresource") or ""),
                )
            )
    return out


def readable(managed: Any) -> bool:
    """Whether the real server could decode every entry of a client's ``managedFields``: it
    ignores the whole list (keeping what was stored) when one entry is unreadable."""
    if not isinstance(managed, list):
        return False
    if managed == [{}]:
        return True  # the documented way to reset them
    return all(
        isinstance(e, Mapping)
        and isinstance(e.get("manager"), str)
        and e.get("operation") in ("Apply", "Update")
        and e.get("fieldsType") == "FieldsV1"
        and isinstance(e.get("fieldsV1", {}), Mapping)
        for e in managed
    )


def same(a: Any, b: Any) -> bool:
    """Whether two managedFields say the same (times compared as instants, not as text)."""

    def said(m: Any) -> list[tuple[str, str, str, str, set[Path]]]:
        return [(e.manager, e.operation, e.api_version, e.subresource, e.fields) for e in decode(m)]

    return said(a) == said(b)


def encode(entries: Iterable[Entry]) -> list[dict[str, Any]]:
    """Stored order, as the real server sorts: Apply before Update, then by time and manager."""
    kept = [e for e in entries if e.fields]
    kept.sort(key=lambda e: (e.operation, e.time, e.manager, e.subresource))
    return [e.encode() for e in kept]


def paths_of(fields: Mapping[str, Any], here: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for key, child in fields.items():
        if key == ".":
            out.add(here)
        elif isinstance(child, Mapping) and child:
            out |= paths_of(child, (*here, key))
        else:
            out.add((*here, key))
    return out


def fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    members = set(paths)
    root: dict[str, Any] = {}
    for path in sorted(members):
        node = root
        for key in path:
            node = node.setdefault(key, {})
    for path in members:
        node = root
        for key in path:
            node = node[key]
        if node and "." not in node:
            node["."] = {}
    return root
