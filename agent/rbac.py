"""Every Kubernetes permission the agent uses, in one place (the Helm chart's Role follows it).

Each entry is (apiGroup, resource, verbs). The code touches nothing else; a test compares these
against the calls recorded during a run.
"""

from __future__ import annotations

from typing import Final

RULES: Final[tuple[tuple[str, str, tuple[str, ...]], ...]] = (
    # TenantControlPlanes: the agent's whole job.
    ("kamaji.clastix.io", "tenantcontrolplanes", ("get", "list", "watch", "create", "patch", "delete")),
    # <tcp>-admin-kubeconfig and <tcp>-ca, watched to seal back to the hub.
    ("", "secrets", ("list", "watch")),
    # Warning events about orphans.
    ("", "events", ("create",)),
)

IDENTITY_RULES: Final[tuple[tuple[str, str, tuple[str, ...]], ...]] = (
    # Operator mode: its own NKey seed and JWT, in one Secret of its own namespace (the chart's
    # Role names that Secret for get and update; create cannot be limited to a name).
    ("", "secrets", ("get", "create", "update")),
)
