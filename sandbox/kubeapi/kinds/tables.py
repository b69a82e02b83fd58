"""Server-side printing: ``meta.k8s.io/v1`` Table responses for ``kubectl get``.

Owns the columns of each resource (a CRD's ``additionalPrinterColumns``, a few for the
built-ins), a small JSONPath evaluator for them (``.a.b``, ``[n]``, ``[*]``,
``[?(@.k=="v")]``, ``['a\\.b/c']`` as CAPI's Cluster column), and human-readable ages. Pure.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from sandbox.kubeapi.kinds import resources

_NAME_COLUMN = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name must be unique within a namespace.",
    "priority": 0,
}
_AGE = resources.PrinterColumn(
    "Age", "date", ".metadata.creationTimestamp", "CreationTimestamp is a timestamp."
)

_BUILTIN_COLUMNS: dict[tuple[str, str], list[resources.PrinterColumn]] = {
    ("", "namespaces"): [resources.PrinterColumn("Status", "string", ".status.phase"), _AGE],
    ("", "secrets"): [
        resources.PrinterColumn("Type", "string", ".type"),
        resources.PrinterColumn("Data", "integer", ".data"),
        _AGE,
    ],
    ("", "configmaps"): [resources.PrinterColumn("Data", "integer", ".data"), _AGE],
    ("", "events"): [
        resources.PrinterColumn("Type", "string", ".type"),
        resources.PrinterColumn("Reason", "string", ".reason"),
        resources.PrinterColumn("Message", "string", ".message"),
        _AGE,
    ],
    ("coordination.k8s.io", "leases"): [
        resources.PrinterColumn("Holder", "string", ".spec.holderIdentity"),
        _AGE,
    ],
    ("apiextensions.k8s.io", "customresourcedefinitions"): [
        resources.PrinterColumn("Created At", "date", ".metadata.creationTimestamp")
    ],
}

_SEGMENT = re.compile(
    r"\.([A-Za-z0-9_\-/]+)|\[(\d+|\*)\]|\[\?\(@\.([A-Za-z0-9_.\-]+)\s*==\s*[\"']([^\"']*)[\"']\)\]"
    r"|\['((?:[^'\\]|\\.)*)'\]"
)
"""One step: ``.field``, ``[n]``/``[*]``, a filter, or a quoted key whose dots are escaped
(``['cluster\\.x-k8s\\.io/cluster-name']``, a label name)."""


def columns(rtype: resources.ResourceType, version: str) -> list[resources.PrinterColumn]:
    if rtype.crd_name:
        return rtype.printer_columns.get(version) or [_AGE]
    return _BUILTIN_COLUMNS.get(rtype.key, [_AGE])


def jsonpath(obj: Any, path: str) -> list[Any]:
    """Every value ``path`` selects in ``obj`` (the subset printer columns use)."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    current = [obj]
    pos = 0
    while pos < len(path):
        match = _SEGMENT.match(path, pos)
        if match is None:
            return []
        field, index, key, value, quoted = match.groups()
        if quoted is not None:
            field = re.sub(r"\\(.)", r"\1", quoted)
        nxt: list[Any] = []
        for item in current:
            if field is not None and isinstance(item, dict) and field in item:
                nxt.append(item[field])
            elif index == "*" and isinstance(item, list):
                nxt.extend(item)
            elif index is not None and index != "*" and isinstance(item, list) and int(index) < len(item):
                nxt.append(item[int(index)])
            elif key is not None and isinstance(item, list):
                nxt.extend(e for e in item if isinstance(e, dict) and str(dig(e, key)) == value)
        current = nxt
        pos = match.end()
    return current


def dig(obj: dict[str, Any], dotted: str) -> Any:
    """The value at a dotted path (``spec.replicas``), or None where a step is missing."""
    current: Any = obj
    for part in dotted.split("."):
        current = current.get(part) if isinstance(current, dict) else None
    return current


def human_age(stamp: str, *, now: datetime | None = None) -> str:
    """Like Kubernetes' duration.HumanDuration."""
    try:
        then = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<invalid>"
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    return f"{days}d{hours % 24}h" if days < 8 and hours % 24 else f"{days}d"


def _cell(column: resources.PrinterColumn, obj: dict[str, Any]) -> Any:
    values = jsonpath(obj, column.json_path)
    if not values:
        return None
    value = values[0]
    if column.name == "Data" and isinstance(value, dict):
        return len(value)
    if column.type == "date" and isinstance(value, str):
        return human_age(value)
    if len(values) > 1:
        return ",".join(str(v) for v in values)
    if column.type in ("integer", "number", "boolean") or isinstance(value, int | float | bool):
        return value
    return value if isinstance(value, str) else str(value)


def definitions(cols: list[resources.PrinterColumn]) -> list[dict[str, Any]]:
    defs = [dict(_NAME_COLUMN)]
    for col in cols:
        defs.append(
            {
                "name": col.name,
                "type": "string" if col.type == "date" else col.type,
                "format": col.format,
                "description": col.description,
                "priority": col.priority,
            }
        )
    return defs


def row(cols: list[resources.PrinterColumn], obj: dict[str, Any], include: str) -> dict[str, Any]:
    cells = [obj["metadata"].get("name", ""), *(_cell(col, obj) for col in cols)]
    out: dict[str, Any] = {"cells": cells}
    if include == "Object":
        out["object"] = obj
    elif include != "None":
        out["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj["metadata"],
        }
    return out


def table(
    cols: list[resources.PrinterColumn],
    objs: list[dict[str, Any]],
    *,
    include: str,
    metadata: dict[str, Any],
    headers: bool = True,
) -> dict[str, Any]:
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": definitions(cols) if headers else [],
        "rows": [row(cols, obj, include) for obj in objs],
    }
