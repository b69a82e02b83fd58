"""common.doctor.kubechecks: the reviews a process's RBAC rules ask, and what the answers mean."""

from __future__ import annotations

import pytest

from agent import rbac as agent_rbac
from common.doctor import kubechecks
from common.kube.reviews import Access
from hub import rbac as hub_rbac


@pytest.mark.parametrize(
    ("id_", "rules", "namespaces", "kwargs", "expected"),
    [
        (
            "one per verb and namespace",
            [("", "secrets", ("list", "watch"))],
            ["a", "b"],
            {},
            [Access("list", "", "secrets", "a"), Access("list", "", "secrets", "b"),
             Access("watch", "", "secrets", "a"), Access("watch", "", "secrets", "b")],
        ),
        ("every namespace", [("", "events", ("create",))], [], {}, [Access("create", "", "events", "")]),
        (
            "cluster-scoped, subresource included",
            [("kamaji-broker.io", "sites/status", ("patch",))],
            ["a"],
            {"cluster_scoped": frozenset({"sites"})},
            [Access("patch", "kamaji-broker.io", "sites/status", "")],
        ),
        (
            "a name only where RBAC can limit to it",
            [("", "secrets", ("get", "create"))],
            ["kb"],
            {"name": "agent-identity"},
            [Access("create", "", "secrets", "kb"), Access("get", "", "secrets", "kb", "agent-identity")],
        ),
    ],
)  # fmt: skip
def test_accesses(
    id_: str,
    rules: list[kubechecks.Rule],
    namespaces: list[str],
    kwargs: dict[str, object],
    expected: list[Access],
) -> None:
    assert list(kubechecks.accesses(rules, namespaces, **kwargs)) == expected, id_  # type: ignore[arg-type]


def test_the_processes_rules_in_numbers() -> None:
    assert len(kubechecks.accesses(agent_rbac.RULES, ["tenants"])) == 9
    # Secrets are in two scopes (watched namespaces, bootstrap): cluster-wide, one access each verb.
    assert sum(len(verbs) for *_, verbs in hub_rbac.RULES) == 27
    assert len(kubechecks.accesses(hub_rbac.RULES, [])) == 24


def test_access_attributes() -> None:
    assert Access("patch", "k.io", "sites/status", "", "s1").attributes() == {
        "verb": "patch", "group": "k.io", "resource": "sites", "subresource": "status", "name": "s1",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("denied", "outcome", "detail"),
    [
        ([], "PASS", "all 9 permissions granted (SelfSubjectAccessReview)"),
        (
            [Access("watch", "", "secrets", "tenants"), Access("patch", "k.io", "sites/status")],
            "FAIL",
            "2 of 9 denied: (watch, core, secrets, namespace tenants), "
            "(patch, k.io, sites/status, cluster-wide)",
        ),
    ],
)
def test_rbac(denied: list[Access], outcome: str, detail: str) -> None:
    got = kubechecks.rbac(9, denied, fix="apply deploy/hub/rbac.yaml")
    assert (got.outcome, got.detail) == (outcome, detail)
    assert got.fix == ("apply deploy/hub/rbac.yaml" if denied else "")


@pytest.mark.parametrize(
    ("missing", "outcome", "detail"),
    [([], "PASS", "a.x.io, b.x.io"), (["b.x.io"], "FAIL", "not served: b.x.io")],
)
def test_crds(missing: list[str], outcome: str, detail: str) -> None:
    got = kubechecks.crds(["a.x.io", "b.x.io"], missing, fix="kubectl apply -k deploy/crds")
    assert (got.outcome, got.detail) == (outcome, detail)
