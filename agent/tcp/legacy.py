"""TenantControlPlanes an older agent wrote before it applied them server-side: handed over.

An older agent created and patched its TCPs (an ``Update`` entry in their managedFields, under
its HTTP client's name) and recorded the spec fields it owned in the ``applied-fields`` and
``applied-hash`` annotations. An apply alone would share those fields with that entry rather
than own them: a field a later intent drops would stay, the old entry still owning it.
``handover`` is the patch that gives the old entry's fields to ``MANAGER``'s Apply, as
client-go's ``csaupgrade`` does for kubectl. The apply after it owns them like any of its own:
it removes those the intent no longer sets (the old annotations among them) and takes back
those a site admin changes. The apply loop hands over a TCP before applying an intent to it,
the cleanup loop on its first pass (and until the old annotations are gone: ``marked``).

The older agent sent no field manager, so its entry is named after its HTTP client
(``OpenAPI-Generator``): a field another tool built on that client set on the TCP is in the
same entry and handed over too. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agent.tcp import managed as tcps

APPLIED_FIELDS: Final = f"{tcps.DOMAIN}/applied-fields"
APPLIED_HASH: Final = f"{tcps.DOMAIN}/applied-hash"
_MARKS: Final = (f"f:{APPLIED_FIELDS}", f"f:{APPLIED_HASH}")


def handover(tcp: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch that makes an older agent's fields in ``tcp`` the agent's Apply's, or None
    when no older agent wrote it. Fenced by the TCP's uid (another TCP of that name: 422) and
    resourceVersion (changed meanwhile: 409), so a stale read never rewrites managedFields."""
    meta = tcps.meta(tcp)
    managed = [e for e in meta.get("managedFields") or () if isinstance(e, Mapping)]
    older = [e for e in managed if _older_agent(e)]
    if not older:
        return None
    ours = next((e for e in managed if _key(e) == (tcps.MANAGER, "Apply", "")), None)
    fields: dict[str, Any] = {}
    for entry in [ours, *older] if ours is not None else older:
        fields = _union(fields, entry.get("fieldsV1") or {})
    first = ours if ours is not None else older[0]
    apply = {
        "manager": tcps.MANAGER,
        "operation": "Apply",
        "apiVersion": first.get("apiVersion") or tcps.TCP.api_version,
        "time": first.get("time"),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    kept = [dict(e) for e in managed if e is not ours and not any(e is o for o in older)]
    return {
        "metadata": {
            "uid": tcps.uid(tcp),
            "resourceVersion": str(meta.get("resourceVersion") or ""),
            "managedFields": [*kept, {k: v for k, v in apply.items() if v is not None}],
        }
    }


def marked(tcp: Mapping[str, Any]) -> bool:
    """Whether the older agent's annotations are still on ``tcp`` (an apply after the handover,
    which owns them, removes them)."""
    notes = tcps.meta(tcp).get("annotations") or {}
    return isinstance(notes, Mapping) and (APPLIED_FIELDS in notes or APPLIED_HASH in notes)


def _key(entry: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    return entry.get("manager"), entry.get("operation"), entry.get("subresource") or ""


def _older_agent(entry: Mapping[str, Any]) -> bool:
    """An Update of the object (not a subresource) that wrote an older agent's own annotations."""
    if entry.get("operation") != "Update" or entry.get("subresource"):
        return False
    fields = entry.get("fieldsV1")
    meta = fields.get("f:metadata") if isinstance(fields, Mapping) else None
    notes = meta.get("f:annotations") if isinstance(meta, Mapping) else None
    return isinstance(notes, Mapping) and any(mark in notes for mark in _MARKS)


def _union(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two fieldsV1 sets as one: every field either names."""
    out = dict(a)
    for key, value in b.items():
        mine = out.get(key)
        if isinstance(mine, Mapping) and isinstance(value, Mapping):
            out[key] = _union(mine, value)
        elif key not in out:
            out[key] = value
    return out
