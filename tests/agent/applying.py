"""TCPs with the managedFields a real server gives them, for the agent's pure tests: applied by
the agent, then changed by others. The server's part is the emulator's pure core
(``sandbox.kubeapi.apply.managedfields``), which tests/sandbox/kubeapi/test_applying holds to
kube-apiserver's behaviour."""

from __future__ import annotations

import copy
from typing import Any

from agent.tcp import managed as tcps
from sandbox.kubeapi.apply import managedfields

NOW = "2026-01-01T00:00:00Z"
API_VERSION = tcps.TCP.api_version


def applied(body: dict[str, Any], live: dict[str, Any] | None = None) -> dict[str, Any]:
    """``live`` (None: absent) after the agent's forced apply of ``body``."""
    managed = (live or {}).get("metadata", {}).get("managedFields")
    obj, managed = managedfields.applied(
        live, body, managed, manager=tcps.MANAGER, force=True, schema={}, api_version=API_VERSION, now=NOW
    )
    obj["metadata"]["managedFields"] = managed
    return obj


def updated(live: dict[str, Any], new: dict[str, Any], *, manager: str) -> dict[str, Any]:
    """``new`` as an Update by ``manager`` of ``live`` leaves it (kubectl edit, patch)."""
    out = copy.deepcopy(new)
    managed = live["metadata"].get("managedFields")
    out["metadata"]["managedFields"] = managedfields.updated(
        live, new, managed, manager=manager, schema={}, api_version=API_VERSION, now=NOW
    )
    return out
