"""Labels and annotations propagated from the RKCP to its TCP, beside the agent's own.

The hub puts the RKCP's labels and annotations into the intent (``hub.mapping.tcp.tcp_metadata``),
as the Kamaji CAPI provider copies its KamajiControlPlane's onto the TCP. The TCP's metadata is
shared with others (Kamaji, a site admin, other controllers), so, unlike the provider (which
replaces the labels whole), the agent merges:

- ``patch`` sets the wanted keys and removes only the keys it propagated before and no longer
  wants, which it records in the ``kamaji-broker.io/propagated`` annotation (the JSON
  ``{"labels": [...], "annotations": [...]}`` of the keys, never their values);
- its own keys (the ``kamaji-broker.io/`` domain: ownership, fencing, this record) are never
  propagated: ``problem`` refuses an intent that names one, as it refuses keys and values that
  Kubernetes would refuse (qualified names, label values, 256 KiB of annotations), so a hostile
  or broken intent is a clear Rejected rather than an Invalid from the API or a hijacked TCP.

Pure: talks to nothing. ``agent.tcp.managed`` puts the result into the bodies it creates and patches.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

DOMAIN: Final = "kamaji-broker.io"
"""The prefix of every key the agent writes on a TCP for itself."""
PROPAGATED: Final = f"{DOMAIN}/propagated"
MAX_ANNOTATIONS_BYTES: Final = 256 * 1024
"""Kubernetes' limit on the annotations of one object, keys and values together."""

_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

Metadata = tuple[dict[str, str | None], dict[str, str | None]]
"""(labels, annotations) to merge into a TCP's metadata; None removes a key."""


def key_problem(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes qualified name (``[prefix/]name``), or None."""
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return "must be a qualified name: at most one '/'"
    if key.startswith("/") or (prefix and (len(prefix) > 253 or not _SUBDOMAIN.fullmatch(prefix))):
        return "its prefix must be a DNS-1123 subdomain of at most 253 characters"
    if len(name) > 63 or not _NAME.fullmatch(name):
        return (
            "its name must be 1 to 63 alphanumeric characters, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )
    if prefix == DOMAIN or prefix.endswith(f".{DOMAIN}"):
        return f"the {DOMAIN}/ keys are the agent's own record of the TCP and cannot be set"
    return None


def problem(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str | None:
    """Why the propagated metadata cannot go on a TCP (naming the key), or None when it can."""
    for kind, entries in (("label", labels), ("annotation", annotations)):
        for key in sorted(entries):
            if (why := key_problem(key)) is not None:
                return f"{kind} key {key!r}: {why}"
    for key, value in sorted(labels.items()):
        if value and (len(value) > 63 or not _NAME.fullmatch(value)):
            return (
                f"label {key!r}: its value must be empty or 1 to 63 alphanumeric characters, "
                "'-', '_' or '.', starting and ending with an alphanumeric"
            )
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > MAX_ANNOTATIONS_BYTES:
        return f"annotations: {size} bytes, more than the {MAX_ANNOTATIONS_BYTES} Kubernetes allows"
    return None


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def recorded(obj: Mapping[str, Any] | None) -> tuple[frozenset[str], frozenset[str]]:
    """The (label, annotation) keys the agent propagated to ``obj`` before (none when unreadable)."""
    raw = (_meta(obj).get("annotations") or {}).get(PROPAGATED)
    try:
        decoded = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        decoded = {}
    if not isinstance(decoded, dict):
        decoded = {}

    def keys(kind: str) -> frozenset[str]:
        value = decoded.get(kind)
        if not isinstance(value, list):
            return frozenset()
        # Never our own domain, whatever the record says: it must not remove the agent's keys.
        return frozenset(k for k in value if isinstance(k, str) and not k.startswith(f"{DOMAIN}/"))

    return keys("labels"), keys("annotations")


def merged(
    labels: Mapping[str, str], annotations: Mapping[str, str], observed: Mapping[str, Any] | None = None
) -> Metadata:
    """The labels and annotations to merge into the TCP ``observed`` (None: a TCP to create).

    Sets every wanted key; removes (None) the keys recorded as propagated before and no longer
    wanted; keeps the record current (removed with the last propagated key).
    """
    before_labels, before_annotations = recorded(observed)
    out_labels: dict[str, str | None] = {k: None for k in before_labels - labels.keys()}
    out_labels.update(labels)
    out_annotations: dict[str, str | None] = {k: None for k in before_annotations - annotations.keys()}
    out_annotations.update(annotations)
    if labels or annotations:
        record = {"labels": sorted(labels), "annotations": sorted(annotations)}
        out_annotations[PROPAGATED] = json.dumps(record, separators=(",", ":"), ensure_ascii=False)
    elif before_labels or before_annotations or PROPAGATED in (_meta(observed).get("annotations") or {}):
        out_annotations[PROPAGATED] = None
    return out_labels, out_annotations


def differs(labels: Mapping[str, str], annotations: Mapping[str, str], observed: Mapping[str, Any]) -> bool:
    """Whether ``observed`` lacks a wanted key or value, or still holds one we removed."""
    want_labels, want_annotations = merged(labels, annotations, observed)
    m = _meta(observed)
    for want, have in ((want_labels, m.get("labels") or {}), (want_annotations, m.get("annotations") or {})):
        for key, value in want.items():
            if have.get(key) != value:
                return True
    return False
