"""TenantControlPlanes as the agent manages them: labels, annotations, the desired object, drift.

Pure. The annotations are the agent's durable record of what it applied (OCM's
AppliedResources): owner uid for delete fencing, the intent's stream sequence for ordering,
so both survive agent restarts.

Field ownership is the API server's: the agent writes a TCP by server-side apply as field
manager ``MANAGER`` (forced, as Cluster API's providers and Kamaji do), so the server removes
a field the agent applied before and no longer applies (a certSAN or a service label removed
from the RKCP), leaves alone the fields others set and the agent does not (Kamaji's, the CRD's
defaults, a site admin's), and takes back a field of ours someone changed. ``drift`` says what
an apply would change: a field whose value differs from the spec (compared as
``agent.tcp.fieldpaths`` does: inside a list of maps, only the fields we set), a field the spec
sets that the TCP's ``managedFields`` no longer give to ``MANAGER`` (someone else changed it),
and one they still give it that the spec no longer sets. A TCP an older agent wrote (before
it applied server-side) is handed over to ``MANAGER``'s Apply first (``agent.tcp.legacy``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from agent.tcp import fieldpaths, propagation
from common.kube import resources
from protocol import messages, names

DOMAIN: Final = propagation.DOMAIN
MANAGED_BY: Final = f"{DOMAIN}/managed-by"
MANAGED_BY_VALUE: Final = "kamaji-broker"
SITE: Final = f"{DOMAIN}/site"
OWNER_UID: Final = f"{DOMAIN}/owner-uid"
OWNER: Final = f"{DOMAIN}/owner"
CLUSTER: Final = f"{DOMAIN}/cluster"
GENERATION: Final = f"{DOMAIN}/generation"
INTENT_SEQ: Final = f"{DOMAIN}/intent-seq"
KUBECONFIG_KEY: Final = f"{DOMAIN}/kubeconfig-key"
MANAGER: Final = "kamaji-broker-agent"
"""The agent's field manager: what its server-side applies own in the TCP's managedFields."""

Path = fieldpaths.Path
Owned = fieldpaths.Owned

TCP = resources.TENANT_CONTROL_PLANE


def selector(site: str) -> str:
    """The label selector of this site's managed TCPs."""
    return f"{MANAGED_BY}={MANAGED_BY_VALUE},{SITE}={site}"


@dataclass(frozen=True)
class Applied:
    """What the annotations of an observed TCP say we applied (None when it is not ours)."""

    owner_uid: str
    intent_seq: int
    generation: int
    kubeconfig_key: str


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def uid(obj: Mapping[str, Any]) -> str:
    """The object's uid ("" when it has none, as a body not yet created)."""
    return str(meta(obj).get("uid") or "")


def applied(obj: Mapping[str, Any], *, site: str) -> Applied | None:
    m = meta(obj)
    labels = m.get("labels") or {}
    if labels.get(MANAGED_BY) != MANAGED_BY_VALUE or labels.get(SITE) != site:
        return None
    notes = m.get("annotations") or {}
    try:
        seq = int(notes.get(INTENT_SEQ) or 0)
        generation = int(notes.get(GENERATION) or 0)
    except ValueError:
        seq, generation = 0, 0
    return Applied(
        owner_uid=str(notes.get(OWNER_UID) or ""),
        intent_seq=seq,
        generation=generation,
        kubeconfig_key=str(notes.get(KUBECONFIG_KEY) or names.ADMIN_KUBECONFIG_KEY),
    )


def deleting(obj: Mapping[str, Any]) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def metadata_for(
    intent: messages.Intent, *, seq: int, observed: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Our labels and annotations, after those the intent propagates (``agent.tcp.propagation``).

    Only the keys we set: one we propagated before and no longer want goes because we no
    longer apply it (the nulls of ``merged`` are for a merge patch, an apply has no use for them).
    """
    labels, annotations = propagation.merged(intent.labels, intent.annotations, observed)
    return {
        "labels": {**_set(labels), MANAGED_BY: MANAGED_BY_VALUE, SITE: intent.site},
        "annotations": {
            **_set(annotations),
            OWNER_UID: intent.owner.uid,
            OWNER: f"{intent.owner.namespace}/{intent.owner.name}",
            CLUSTER: intent.owner.cluster,
            GENERATION: str(intent.generation),
            INTENT_SEQ: str(seq),
            KUBECONFIG_KEY: intent.kubeconfig_key,
        },
    }


def _set(values: Mapping[str, str | None]) -> dict[str, str]:
    return {k: v for k, v in values.items() if v is not None}


def desired(
    intent: messages.Intent, *, seq: int, observed: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The TCP a provision intent wants: the body to create, and to apply (all the fields we own)."""
    meta = metadata_for(intent, seq=seq, observed=observed)
    return {
        "apiVersion": TCP.api_version,
        "kind": TCP.kind,
        "metadata": {"name": intent.name, "namespace": intent.namespace, **meta},
        # A copy without nulls (they are no value): the body is the caller's to change, the intent is not.
        "spec": _without_nulls(intent.spec),
    }


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return json.loads(json.dumps(value))


leaves = fieldpaths.leaves


def owned(obj: Mapping[str, Any]) -> set[Owned] | None:
    """The spec fields ``MANAGER``'s apply owns in ``obj``'s managedFields, each cut at its
    first list (a list is owned whole, or item by item: either way the list is ours); None
    when the agent never applied it (an older agent's TCP, or one created by someone else)."""
    for entry in meta(obj).get("managedFields") or ():
        if not isinstance(entry, Mapping) or entry.get("subresource"):
            continue
        if (entry.get("manager"), entry.get("operation")) == (MANAGER, "Apply"):
            spec = (entry.get("fieldsV1") or {}).get("f:spec") or {}
            return set(_fields(spec, ())) if isinstance(spec, Mapping) else set()
    return None


def _fields(node: Mapping[str, Any], here: Owned) -> list[Owned]:
    out: list[Owned] = []
    for key, child in node.items():
        if not key.startswith("f:"):
            continue  # ".", or an item of a list: the list is the field
        path = (*here, key[2:])
        inner = isinstance(child, Mapping) and any(k.startswith("f:") for k in child)
        out.extend(_fields(child, path) if inner else [path])
    return out


def drift(spec: Mapping[str, Any], observed: Mapping[str, Any]) -> list[str]:
    """Dotted paths where the TCP ``observed`` is not what applying ``spec`` makes it, sorted.

    Every field of ``spec`` that is missing or differs, or that ``MANAGER`` no longer owns (a
    site admin changed it: the forced apply takes it back), and every field it still owns that
    ``spec`` no longer has (the apply removes it). Fields nobody asked us for are not drift.
    The paths are for logs: never the values.
    """
    have = observed.get("spec") or {}
    wanted = leaves(spec)
    out = {_dotted(p) for p in fieldpaths.differing(spec, have, wanted)}
    ours = owned(observed)
    want = set(fieldpaths.owned(wanted))
    if ours is not None:
        out |= {_dotted(p) for p in (want - ours) | (ours - want)}
    else:
        # Never applied by us (an older agent's, handed over first: ``agent.tcp.legacy``): the apply takes it.
        out |= {_dotted(p) for p in want}
    return sorted(out)


def drifted(obj: Mapping[str, Any], spec: Mapping[str, Any] | None) -> bool:
    """Whether someone changed a field we own: ``drift`` from the spec last applied (None: not
    known yet, as after a restart, until the anti-entropy pass reads the intents)."""
    return spec is not None and bool(drift(spec, obj))


def _dotted(path: Path) -> str:
    return ".".join(f"[{k}]" if isinstance(k, int) else k for k in path).replace(".[", "[")
