"""What the API server answers a list and a watch with, as ``common.kube.client.Kube`` returns it.

``Listing`` (a list's items and resourceVersion), ``WatchEvent`` and ``event_of`` (one line of
a watch stream; an ERROR event raised as ``common.kube.errors``). Pure: no client library.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from common.kube import errors


@dataclass(frozen=True)
class WatchEvent:
    """ADDED, MODIFIED, DELETED or BOOKMARK, with the object as a dict."""

    type: str
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


@dataclass(frozen=True)
class Listing:
    items: list[dict[str, Any]]
    resource_version: str


def event_of(line: bytes) -> WatchEvent:
    """One line of a watch stream; an ERROR event raises (``errors.Gone`` for an expired version)."""
    try:
        event = json.loads(line)
    except ValueError:
        # A line cut short (the connection dropped mid-event) is a transport failure like any
        # other: the caller resumes from the last version it saw.
        raise errors.Unavailable(0, "MalformedWatchEvent", line[:200].decode("utf-8", "replace")) from None
    kind, obj = str(event.get("type") or ""), event.get("object") or {}
    if kind == "ERROR":
        raise errors.from_status(int(obj.get("code") or 0), json.dumps(obj), str(obj.get("reason") or ""))
    return WatchEvent(type=kind, object=obj)
