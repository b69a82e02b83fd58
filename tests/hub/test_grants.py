"""hub.grants: where each scope of the hub's rules must hold, for the hub's settings."""

from __future__ import annotations

import pytest

from hub import grants, rbac

NS, CW = rbac.NAMESPACED, rbac.CLUSTER


@pytest.mark.parametrize(
    ("id_", "watched", "lease", "bootstrap", "expected"),
    [
        ("cluster-wide", (), "", "", [(NS, ()), (CW, ())]),
        ("namespaced", ("a", "b"), "", "", [(NS, ("a", "b")), (CW, ())]),
        ("leader", ("a",), "kb", "", [(NS, ("a",)), (CW, ()), ((rbac.LEASES,), ("kb",))]),
        (
            "operator mode",
            (),
            "kb",
            "boot",
            [(NS, ()), (CW, ()), ((rbac.LEASES,), ("kb",)), ((rbac.BOOTSTRAP_SECRETS,), ("boot",))],
        ),
    ],
)
def test_grants(
    id_: str,
    watched: tuple[str, ...],
    lease: str,
    bootstrap: str,
    expected: list[tuple[tuple[rbac.Rule, ...], tuple[str, ...]]],
) -> None:
    found = grants.grants(watched, lease_namespace=lease, bootstrap_namespace=bootstrap)
    assert [(g.rules, g.namespaces) for g in found] == expected, id_


@pytest.mark.parametrize(
    ("watched", "says", "never"),
    [
        ((), "ClusterRoleBinding of that name: `kubectl apply --server-side -k deploy/hub`", "watched"),
        (("a", "b"), "RoleBinding kamaji-broker-hub in each watched namespace (a, b)", "ClusterRoleBinding"),
    ],
    ids=["cluster-wide", "namespaced"],
)
def test_the_namespaced_rules_fix_names_the_install(watched: tuple[str, ...], says: str, never: str) -> None:
    [namespaced] = [g for g in grants.grants(watched) if g.rules == rbac.NAMESPACED]
    assert says in namespaced.fix and never not in namespaced.fix


def test_every_rule_has_one_scope() -> None:
    scopes = [rbac.NAMESPACED, rbac.CLUSTER, (rbac.LEASES,), (rbac.BOOTSTRAP_SECRETS,)]
    assert [r for scope in scopes for r in scope] == list(rbac.RULES)
    found = grants.grants(("a",), lease_namespace="kb", bootstrap_namespace="kb")
    assert [g.rules for g in found] == scopes
