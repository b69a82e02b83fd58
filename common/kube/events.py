"""core/v1 Events, as client-go's recorder writes them. Pure: builds the object; callers create it.

Event messages are read by anyone who may list events: never put secret material in them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from common.kube import resources


def new_event(
    involved: resources.Resource,
    *,
    namespace: str,
    name: str,
    uid: str,
    type: Literal["Normal", "Warning"],
    reason: str,
    message: str,
    component: str,
    instance: str = "",
    now: dt.datetime,
) -> dict[str, Any]:
    """An Event about object ``namespace/name`` (named ``<name>.<hex nanoseconds>``, as client-go does)."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": resources.EVENT.api_version,
        "kind": resources.EVENT.kind,
        "metadata": {"name": f"{name}.{int(now.timestamp() * 1e9):x}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": involved.api_version,
            "kind": involved.kind,
            "namespace": namespace,
            "name": name,
            "uid": uid,
        },
        "type": type,
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": instance or component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
