"""TenantControlPlanes as the agent manages them: labels, annotations, the desired object.

Pure. The annotations are the agent's durable record of what it applied (OCM's
AppliedResources): owner uid for delete fencing, the intent's stream sequence for ordering,
so both survive agent restarts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from common.kube import resources
from protocol import messages

DOMAIN: Final = "kamaji-broker.io"
MANAGED_BY: Final = f"{DOMAIN}/managed-by"
MANAGED_BY_VALUE: Final = "kamaji-broker"
SITE: Final = f"{DOMAIN}/site"
OWNER_UID: Final = f"{DOMAIN}/owner-uid"
OWNER: Final = f"{DOMAIN}/owner"
CLUSTER: Final = f"{DOMAIN}/cluster"
GENERATION: Final = f"{DOMAIN}/generation"
INTENT_SEQ: Final = f"{DOMAIN}/intent-seq"
KUBECONFIG_KEY: Final = f"{DOMAIN}/kubeconfig-key"

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
        kubeconfig_key=str(notes.get(KUBECONFIG_KEY) or "admin.conf"),
    )


def deleting(obj: Mapping[str, Any]) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def metadata_for(intent: messages.Intent, *, seq: int) -> dict[str, Any]:
    return {
        "labels": {MANAGED_BY: MANAGED_BY_VALUE, SITE: intent.site},
        "annotations": {
            OWNER_UID: intent.owner.uid,
            OWNER: f"{intent.owner.namespace}/{intent.owner.name}",
            CLUSTER: intent.owner.cluster,
            GENERATION: str(intent.generation),
            INTENT_SEQ: str(seq),
            KUBECONFIG_KEY: intent.kubeconfig_key,
        },
    }


def desired(intent: messages.Intent, *, seq: int) -> dict[str, Any]:
    """The TCP to create for a provision intent."""
    return {
        "apiVersion": TCP.api_version,
        "kind": TCP.kind,
        "metadata": {"name": intent.name, "namespace": intent.namespace, **metadata_for(intent, seq=seq)},
        "spec": intent.spec,
    }


def patch_for(intent: messages.Intent, *, seq: int) -> dict[str, Any]:
    """A merge patch that sets every field we own. Fields we never set (Kamaji's defaults) stay."""
    return {"metadata": metadata_for(intent, seq=seq), "spec": intent.spec}


def drift(spec: Mapping[str, Any], observed: Mapping[str, Any]) -> list[str]:
    """Paths of the fields of ``spec`` whose observed value differs (or is missing)."""
    out: list[str] = []

    def walk(want: Any, have: Any, path: str) -> None:
        if isinstance(want, Mapping) and isinstance(have, Mapping):
            for key, value in want.items():
                walk(value, have.get(key), f"{path}.{key}" if path else str(key))
        elif want != have:
            out.append(path or ".")

    walk(spec, observed, "")
    return out
