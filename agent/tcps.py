"""TenantControlPlanes as the agent manages them: labels, annotations, the desired object, drift.

Pure. The annotations are the agent's durable record of what it applied (OCM's
AppliedResources): owner uid for delete fencing, the intent's stream sequence for ordering,
so both survive agent restarts.

Field ownership (issue 11 §5). The spec fields we own are the leaves of the intent's spec: a
scalar, a list (lists are atomic: replaced whole, as SSA treats a list without a list-type) or
an empty map (owned as "present"; whatever Kamaji defaults inside it is not ours). Two more
annotations record them, like kubectl's last-applied-configuration but without the values:

- ``applied-fields``: the JSON list of the owned leaf paths (each a list of keys: keys may hold
  dots and slashes, service labels do);
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

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent import propagation
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

Path = tuple[str, ...]
"""Keys from ``spec`` down to one owned field."""

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
            APPLIED_FIELDS: _encode_paths(owned),
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
        before = owned_fields(observed) or []
        _null_removed(spec, observed.get("spec") or {}, before, leaves(intent.spec))
    return {"metadata": metadata_for(intent, seq=seq, observed=observed), "spec": spec}


def leaves(spec: Mapping[str, Any]) -> list[Path]:
    """The paths of the fields ``spec`` sets: scalars, lists and empty maps, sorted."""
    out: list[Path] = []

    def walk(node: Mapping[str, Any], path: Path) -> None:
        for key, value in node.items():
            here = (*path, str(key))
            if value is None:
                continue  # null is no value: a merge patch removes it, an API server prunes it
            if isinstance(value, Mapping) and value:
                walk(value, here)
            else:
                out.append(here)

    walk(spec, ())
    return sorted(out)


_ABSENT: Final = {"$absent": True}


def _at(spec: Any, path: Path) -> Any:
    """The value at ``path`` as ownership sees it: ``_ABSENT`` when missing or null, ``{}`` for
    any map (we own an empty map's presence, not what others put inside it)."""
    node = spec
    for key in path:
        if not isinstance(node, Mapping) or node.get(key) is None:
            return _ABSENT
        node = node[key]
    if isinstance(node, Mapping):
        return {}
    if isinstance(node, float) and node.is_integer():
        return int(node)  # JSON has one number type: 2.0 from one writer is 2 from another
    return node


def fingerprint(spec: Mapping[str, Any], paths: Iterable[Path]) -> str:
    """SHA-256 of the values of ``spec`` at ``paths`` (canonical JSON; never the values themselves)."""
    projected = [[list(p), _at(spec, p)] for p in sorted(paths)]
    text = json.dumps(projected, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _encode_paths(paths: Sequence[Path]) -> str:
    return json.dumps([list(p) for p in paths], separators=(",", ":"), ensure_ascii=False)


def owned_fields(obj: Mapping[str, Any]) -> list[Path] | None:
    """The paths ``applied-fields`` records; None when absent or unreadable (an older agent's TCP)."""
    raw = (meta(obj).get("annotations") or {}).get(APPLIED_FIELDS)
    if not isinstance(raw, str):
        return None
    try:
        decoded = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(decoded, list) or not all(
        isinstance(p, list) and p and all(isinstance(k, str) for k in p) for p in decoded
    ):
        return None
    return [tuple(p) for p in decoded]


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
    out = {".".join(p) for p in wanted if _at(have, p) != _at(spec, p)}
    for path in _removed(owned_fields(observed) or [], wanted):
        if _at(have, path) is not _ABSENT:
            out.add(".".join(path))
    return sorted(out)


def _removed(before: Iterable[Path], wanted: Sequence[Path]) -> list[Path]:
    """Paths owned before and wanted no more: neither wanted, nor inside or above a wanted field
    (a wanted ancestor replaces the old field anyway; a wanted descendant keeps its map)."""
    now = set(wanted)

    def covered(p: Path) -> bool:
        return any(p[: len(w)] == w or w[: len(p)] == p for w in now)

    return [p for p in before if p not in now and not covered(p)]


def _null_removed(
    patch: dict[str, Any], have: Mapping[str, Any], before: Sequence[Path], wanted: Sequence[Path]
) -> None:
    """Put into ``patch`` (the desired spec) the nulls that remove fields we no longer want.

    A removed field goes with the highest map above it that the desired spec lacks and that
    holds nothing but our fields at the site (so ``additionalMetadata`` goes with its last
    label instead of staying behind empty); Kamaji's fields beside it stay.
    """
    owned = set(before)
    for path in _removed(before, wanted):
        if _at(have, path) is _ABSENT or _nulled(patch, path):
            continue  # not there, or a map above it goes already
        cut = path
        for depth in range(1, len(path)):
            top = path[:depth]
            if _at(patch, top) is not _ABSENT:
                continue  # still wanted: only what is inside it may go
            subtree = objects.dig(have, *top)
            if isinstance(subtree, Mapping) and all(_ours((*top, *leaf), owned) for leaf in leaves(subtree)):
                cut = top
                break
        node = patch
        for key in cut[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        node[cut[-1]] = None


def _ours(path: Path, owned: set[Path]) -> bool:
    """Whether we owned ``path``: it, or a map above it (an empty map we set, filled by Kamaji)."""
    return any(path[:depth] in owned for depth in range(1, len(path) + 1))


def _nulled(patch: Mapping[str, Any], path: Path) -> bool:
    """Whether ``patch`` already removes a map above ``path``."""
    node: Any = patch
    for key in path[:-1]:
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
        if node is None:
            return True
    return False
