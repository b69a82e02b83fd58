"""Where each of the hub's RBAC rules (``hub.rbac``) must hold for given settings, and what grants it.

Pure: the hub's scope (the namespaces it watches, its Lease's and bootstrap Secrets' namespace)
in, one ``Grant`` per Role or ClusterRole of deploy/hub out. ``hub.doctor`` asks a
SelfSubjectAccessReview for each of a grant's verbs in each of its namespaces and names the
grant's object when one is refused; a hub that watches some namespaces is checked there, not
cluster-wide (the namespaced install, deploy/hub/namespaced, grants nothing cluster-wide).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hub import rbac

HUB_ROLE = "kamaji-broker-hub"
SITES_ROLE = "kamaji-broker-hub-sites"
LEASE_ROLE = "kamaji-broker-hub-leader-election"
BOOTSTRAP_ROLE = "kamaji-broker-hub-bootstrap"


@dataclass(frozen=True)
class Grant:
    rules: tuple[rbac.Rule, ...]
    namespaces: tuple[str, ...]
    """Where the rules must hold; empty: cluster-wide."""
    fix: str
    """What grants them, as doctor says it when one is missing."""


def grants(
    watched: Sequence[str], *, lease_namespace: str = "", bootstrap_namespace: str = ""
) -> tuple[Grant, ...]:
    """The grants a hub needs that watches ``watched`` (empty: every namespace), elects its
    leader with a Lease in ``lease_namespace`` and writes bootstrap Secrets in
    ``bootstrap_namespace`` (empty: it does not)."""
    if watched:
        listed = ", ".join(watched)
        namespaced = (
            f"bind the ClusterRole {HUB_ROLE} to the hub's ServiceAccount with a RoleBinding {HUB_ROLE} "
            f"in each watched namespace ({listed}): deploy/hub/namespaced, as deploy/README.md shows"
        )
    else:
        namespaced = (
            f"grant them in the hub's ClusterRole {HUB_ROLE}, bound by the ClusterRoleBinding of that "
            "name: `kubectl apply --server-side -k deploy/hub` (rules from hub/rbac.py)"
        )
    found = [
        Grant(rbac.NAMESPACED, tuple(watched), namespaced),
        Grant(
            rbac.CLUSTER,
            (),
            f"grant them in the ClusterRole {SITES_ROLE}, bound by the ClusterRoleBinding of that name "
            "(deploy/hub/rbac.yaml)",
        ),
    ]
    if lease_namespace:
        found.append(_own(rbac.LEASES, "the Lease", LEASE_ROLE, lease_namespace))
    if bootstrap_namespace:
        secrets = _own(rbac.BOOTSTRAP_SECRETS, "the bootstrap Secrets", BOOTSTRAP_ROLE, bootstrap_namespace)
        found.append(secrets)
    return tuple(found)


def _own(rule: rbac.Rule, what: str, role: str, namespace: str) -> Grant:
    fix = (
        f"grant {what} in the Role {role} in namespace {namespace}, bound to the hub's ServiceAccount "
        f"by the RoleBinding of that name: `kubectl apply -n {namespace} -f deploy/hub/rbac.yaml`"
    )
    return Grant((rule,), (namespace,), fix)
