"""Why a control plane is not Ready, in the words of a person rather than of its conditions (for
``fleet.controlplanes``), and ages instead of timestamps. Pure.

An RKCP's ``Ready`` condition is a summary: a reason such as ``HeartbeatMissing`` and a message
of ``* SiteConnected: last heartbeat 2026-12-04T02:57:05+00:00`` lines, one per condition that
keeps it from True. Its ``Available`` condition already says in words why it does not serve; for
one that serves but is not Ready, each culprit condition is worded here. The timestamps a
condition holds (they must not move, or every look would write the object) become ages at the
moment of the look.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any, Final

from hub.api import rkcp

__all__ = ["age", "ages", "why_not_ready"]

_TIMESTAMP: Final = re.compile(r"\b(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d))")
_CULPRIT: Final = re.compile(r"^\* (\w+): ?(.*)$")


def age(seconds: float) -> str:
    """``0s`` .. ``119s``, ``2m`` .. ``119m``, then hours: as precise as a person reads it."""
    if seconds < 120:
        return f"{max(0.0, seconds):.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"


def _ago(match: re.Match[str], now: dt.datetime) -> str:
    try:
        when = dt.datetime.fromisoformat(match.group(1).replace("Z", "+00:00"))
    except ValueError:
        return match.group(0)
    if when.tzinfo is None:
        return match.group(0)
    return f"{age((now - when).total_seconds())} ago"


def ages(text: str, now: dt.datetime | None) -> str:
    """``text`` with each timestamp (ISO 8601, with its zone) as an age at ``now``; as it is
    without ``now``."""
    if now is None:
        return text
    return _TIMESTAMP.sub(lambda m: _ago(m, now), text)


def _culprits(ready: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(condition type, message) of each line of a summary; the reason and message of another."""
    message = str(ready.get("message") or "")
    found = [m.groups() for m in map(_CULPRIT.match, message.splitlines()) if m]
    if found:
        return [(str(kind), str(text)) for kind, text in found]
    reason = str(ready.get("reason") or "")
    return [("", " ".join(message.split()) or reason)] if reason or message else []


def _worded(kind: str, text: str, conditions: Mapping[str, Mapping[str, Any]], site: str) -> str:
    cond = conditions.get(kind) or {}
    reason = str(cond.get("reason") or "")
    if kind == rkcp.SITE_CONNECTED and reason == "HeartbeatMissing":
        return f"site {site} not connected ({text})" if text else f"site {site} not connected"
    if kind == rkcp.SITE_CONNECTED and reason == "NoHeartbeat":
        return f"site {site} has not connected yet (no heartbeat from its agent)"
    if kind == rkcp.TENANT_CONTROL_PLANE_READY:
        phase = reason or text
        detail = f": {text}" if text and text != phase else ""
        return f"the TenantControlPlane at site {site} is {phase}{detail}"
    if kind == rkcp.SECRETS_SYNCED and not text:
        return "its kubeconfig is not written yet"
    if text or not kind:
        return text
    return f"{kind} is {reason}"


def why_not_ready(
    conditions: Mapping[str, Mapping[str, Any]], *, site: str, now: dt.datetime | None = None
) -> str:
    """Why the control plane whose conditions (by type) these are is not Ready, in words; "" when
    its ``Ready`` condition is True (or absent: a hub too old to write one)."""
    ready = conditions.get(rkcp.READY)
    if not ready or ready.get("status") == "True":
        return ""
    available = conditions.get(rkcp.AVAILABLE) or {}
    if available.get("status") == "False" and available.get("message"):
        # The hub words why it does not serve (hub.reconcile.rkcp.progress), from the site's side.
        return ages(" ".join(str(available["message"]).split()), now)
    words = [_worded(kind, text, conditions, site) for kind, text in _culprits(ready)]
    said = "; ".join(dict.fromkeys(w for w in words if w))
    return ages(said, now) or str(ready.get("reason") or "its Ready condition is not True")
