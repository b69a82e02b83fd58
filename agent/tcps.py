"""TenantControlPlanes as the agent manages them: labels, annotations, the desired object, drift.

Pure. The annotations are the agent's durable record of what it applied (OCM's
AppliedResources): owner uid for delete fencing, the intent's stream sequence for ordering,
so both survive agent restarts.

Field ownership (issue 11 §5). The spec fields we own are the leaves of the intent's spec: a
scalar, a list (lists are atomic: replaced whole, as SSA treats a list without a list-type) or
an empty map (owned as "present"; whatever Kamaji defaults inside it is not ours). Inside a
list of maps, we compare item by item only the fields we set (``agent.fieldpaths``), so a
default the CRD writes into an item (a container port's protocol) is not drift. Two more
annotations record them, like kubectl's last-applied-configuration but without the values:

- ``applied-fields``: the JSON list of the compared paths (each a list of keys: keys may hold
  dots and slashes, service labels do; an integer is an index into a list of maps);
- ``applied-hash``: a SHA-256 of the values we applied at those paths.

With them, ``patch_for`` nulls the fields we applied before and no longer want (a certSAN or a
service label removed from the RKCP) and leaves the fields Kamaji or the CRD's defaulting set;
``drifted`` tells from the object alone (no intent at hand, so the status loop can ask it on
every watch event) whether someone changed a field we own; ``drift`` names the paths.
We chose this over server-side apply because it behaves the same on every API server the
agent talks to and needs no managedFields bookkeeping in the emulator; the price is that the
record lives in annotations a site admin could edit (then the next apply writes them again).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent import fieldpaths, propagation
from common import objects
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
APPLIED_FIELDS: Final = f"{DOMAIN}/applied-fields"
APPLIED_HASH: Final = f"{DOMAIN}/applied-hash"

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
    """Our labels and annotations, after those the intent propagates (``agent.propagation``)."""
    owned = leaves(intent.spec)
    labels, annotations = propagation.merged(intent.labels, intent.annotations, observed)
    return {
        "labels": {**labels, MANAGED_BY: MANAGED_BY_VALUE, SITE: intent.site},
        "annotations": {
            **annotations,
            OWNER_UID: intent.owner.uid,
            OWNER: f"{intent.owner.namespace}/{intent.owner.name}",
            CLUSTER: intent.owner.cluster,
            GENERATION: str(intent.generation),
            INTENT_SEQ: str(seq),
            KUBECONFIG_KEY: intent.kubeconfig_key,
            APPLIED_FIELDS: fieldpaths.encode(owned),
            APPLIED_HASH: fingerprint(intent.spec, owned),
        },
    }


def desired(intent: messages.Intent, *, seq: int) -> dict[str, Any]:
    """The TCP to create for a provision intent."""
    return {
        "apiVersion": TCP.api_version,
        "kind": TCP.kind,
        "metadata": {"name": intent.name, "namespace": intent.namespace, **metadata_for(intent, seq=seq)},
        # A copy: the body is the caller's to change, the intent is not.
        "spec": json.loads(json.dumps(intent.spec)),
    }


def patch_for(
    intent: messages.Intent, *, seq: int, observed: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A merge patch that sets every field we own and removes those we owned and no longer want.

    Fields we never set (Kamaji's, the CRD's defaults) stay. ``observed``: the TCP as it is now,
    whose ``applied-fields`` say what we applied before (without them, nothing is removed).
    """
    spec: dict[str, Any] = json.loads(json.dumps(intent.spec))
    if observed is not None:
        before = fieldpaths.owned(owned_fields(observed) or [])
        _null_removed(spec, observed.get("spec") or {}, before, fieldpaths.owned(leaves(intent.spec)))
    return {"metadata": metadata_for(intent, seq=seq, observed=observed), "spec": spec}


leaves = fieldpaths.leaves
fingerprint = fieldpaths.fingerprint


def owned_fields(obj: Mapping[str, Any]) -> list[Path] | None:
    """The paths ``applied-fields`` records; None when absent or unreadable (an older agent's TCP)."""
    return fieldpaths.decode((meta(obj).get("annotations") or {}).get(APPLIED_FIELDS))


def drifted(obj: Mapping[str, Any]) -> bool:
    """Whether a field we own no longer holds what we applied (someone edited the TCP).

    Answered from the object alone, by its ``applied-fields`` and ``applied-hash``; False when
    they are missing (a TCP an older agent applied: the periodic pass compares it with the intent).
    """
    paths = owned_fields(obj)
    want = (meta(obj).get("annotations") or {}).get(APPLIED_HASH)
    if paths is None or not isinstance(want, str):
        return False
    return fingerprint(obj.get("spec") or {}, paths) != want


def drift(spec: Mapping[str, Any], observed: Mapping[str, Any]) -> list[str]:
    """Dotted paths where the TCP ``observed`` differs from the desired ``spec``, sorted.

    Every field of ``spec`` that is missing or differs, and every field we applied before (its
    ``applied-fields``) that ``spec`` no longer has and that is still there. Fields nobody asked
    us for (Kamaji's defaults) are not drift. The paths are for logs: never the values.
    """
    have = observed.get("spec") or {}
    wanted = leaves(spec)
    out = {_dotted(p) for p in fieldpaths.differing(spec, have, wanted)}
    for path in _removed(fieldpaths.owned(owned_fields(observed) or []), fieldpaths.owned(wanted)):
        if fieldpaths.value_at(have, path) is not fieldpaths.ABSENT:
            out.add(_dotted(path))
    return sorted(out)


def _dotted(path: Path) -> str:
    return ".".join(f"[{k}]" if isinstance(k, int) else k for k in path).replace(".[", "[")


def _removed(before: Iterable[Owned], wanted: Sequence[Owned]) -> list[Owned]:
    """Paths owned before and wanted no more: neither wanted, nor inside or above a wanted field
    (a wanted ancestor replaces the old field anyway; a wanted descendant keeps its map)."""
    now = set(wanted)

    def covered(p: Owned) -> bool:
        return any(p[: len(w)] == w or w[: len(p)] == p for w in now)

    return [p for p in before if p not in now and not covered(p)]


def _null_removed(
    patch: dict[str, Any], have: Mapping[str, Any], before: Sequence[Owned], wanted: Sequence[Owned]
) -> None:
    """Put into ``patch`` (the desired spec) the nulls that remove fields we no longer want.

    A removed field goes with the highest map above it that the desired spec lacks and that
    holds nothing but our fields at the site (so ``additionalMetadata`` goes with its last
    label instead of staying behind empty); Kamaji's fields beside it stay.
    """
    owned = set(before)
    for path in _removed(before, wanted):
        if fieldpaths.value_at(have, path) is fieldpaths.ABSENT or _nulled(patch, path):
            continue  # not there, or a map above it goes already
        cut = path
        for depth in range(1, len(path)):
            top = path[:depth]
            if fieldpaths.value_at(patch, top) is not fieldpaths.ABSENT:
                continue  # still wanted: only what is inside it may go
            subtree = objects.dig(have, *top)
            if isinstance(subtree, Mapping) and all(
                _ours((*top, *leaf), owned) for leaf in fieldpaths.owned(leaves(subtree))
            ):
                cut = top
                break
        node = patch
        for key in cut[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        node[cut[-1]] = None


def _ours(path: Owned, owned: set[Owned]) -> bool:
    """Whether we owned ``path``: it, or a map above it (an empty map we set, filled by Kamaji)."""
    return any(path[:depth] in owned for depth in range(1, len(path) + 1))


def _nulled(patch: Mapping[str, Any], path: Owned) -> bool:
    """Whether ``patch`` already removes a map above ``path``."""
    node: Any = patch
    for key in path[:-1]:
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
        if node is None:
            return True
    return False
