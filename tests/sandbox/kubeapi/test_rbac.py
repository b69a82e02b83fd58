"""sandbox.kubeapi.serving.rbac and authn: RBAC evaluated as kube-apiserver's authorizer does (tables)."""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

import pytest

from sandbox.kubeapi import authn
from sandbox.kubeapi.serving import rbac
from tests.sandbox.kubeapi import backends

ALICE = authn.User("alice", "1", ("devs", authn.AUTHENTICATED))
SA = authn.User("system:serviceaccount:site:agent", "2", ("system:serviceaccounts", authn.AUTHENTICATED))


def rule(
    verbs: list[str], resources: list[str], groups: list[str] | None = None, **kw: Any
) -> dict[str, Any]:
    return {"verbs": verbs, "apiGroups": groups if groups is not None else [""], "resources": resources, **kw}


@pytest.mark.parametrize(
    ("id_", "r", "attrs", "allowed"),
    [
        ("verb listed", rule(["get"], ["secrets"]), rbac.Attributes("get", resource="secrets"), True),
        ("verb missing", rule(["get"], ["secrets"]), rbac.Attributes("list", resource="secrets"), False),
        ("verb star", rule(["*"], ["secrets"]), rbac.Attributes("delete", resource="secrets"), True),
        (
            "other group",
            rule(["get"], ["secrets"], ["apps"]),
            rbac.Attributes("get", resource="secrets"),
            False,
        ),
        ("group star", rule(["get"], ["x"], ["*"]), rbac.Attributes("get", "a.io", "x"), True),
        ("resource star", rule(["get"], ["*"], ["a.io"]), rbac.Attributes("get", "a.io", "anything"), True),
        (
            "subresource needs its own entry",
            rule(["patch"], ["sites"], ["k.io"]),
            rbac.Attributes("patch", "k.io", "sites", "status"),
            False,
        ),
        (
            "subresource listed",
            rule(["patch"], ["sites/status"], ["k.io"]),
            rbac.Attributes("patch", "k.io", "sites", "status"),
            True,
        ),
        (
            "star subresource",
            rule(["patch"], ["*/status"], ["k.io"]),
            rbac.Attributes("patch", "k.io", "sites", "status"),
            True,
        ),
        (
            "resourceNames match",
            rule(["get"], ["secrets"], resourceNames=["id"]),
            rbac.Attributes("get", resource="secrets", name="id"),
            True,
        ),
        (
            "resourceNames other name",
            rule(["get"], ["secrets"], resourceNames=["id"]),
            rbac.Attributes("get", resource="secrets", name="other"),
            False,
        ),
        (
            "resourceNames never match without a name",
            rule(["create"], ["secrets"], resourceNames=["id"]),
            rbac.Attributes("create", resource="secrets"),
            False,
        ),
        (
            "non-resource URL",
            {"verbs": ["get"], "nonResourceURLs": ["/version", "/apis/*"]},
            rbac.Attributes("get", path="/apis/x"),
            True,
        ),
    ],
)
def test_rule_allows(id_: str, r: dict[str, Any], attrs: rbac.Attributes, allowed: bool) -> None:
    assert rbac.rule_allows(r, attrs) is allowed, id_


def meta(name: str, namespace: str = "") -> dict[str, Any]:
    return {"name": name, **({"namespace": namespace} if namespace else {})}


def binding(
    name: str, kind: str, role: str, subjects: list[dict[str, Any]], namespace: str = ""
) -> dict[str, Any]:
    return {"metadata": meta(name, namespace), "roleRef": {"kind": kind, "name": role}, "subjects": subjects}


READ_SECRETS = {"metadata": meta("read-secrets"), "rules": [rule(["get", "list"], ["secrets"])]}
SITE_ROLE = {"metadata": meta("agent", "site"), "rules": [rule(["create"], ["events"])]}
OBJECTS = rbac.Objects(
    roles=(SITE_ROLE,),
    cluster_roles=(READ_SECRETS,),
    role_bindings=(
        binding("agent", "Role", "agent", [{"kind": "ServiceAccount", "name": "agent"}], "site"),
        binding("devs-read", "ClusterRole", "read-secrets", [{"kind": "Group", "name": "devs"}], "dev"),
    ),
    cluster_role_bindings=(
        binding(
            "sa-read",
            "ClusterRole",
            "read-secrets",
            [{"kind": "ServiceAccount", "name": "agent", "namespace": "site"}],
        ),
    ),
)


AUTHORIZE_CASES = [
    (
        "masters allowed everything",
        authn.ADMIN,
        rbac.Attributes("delete", "x.io", "y", namespace="z"),
        True,
    ),
    ("Role in its namespace", SA, rbac.Attributes("create", resource="events", namespace="site"), True),
    ("Role not elsewhere", SA, rbac.Attributes("create", resource="events", namespace="other"), False),
    (
        "ClusterRoleBinding everywhere",
        SA,
        rbac.Attributes("list", resource="secrets", namespace="any"),
        True,
    ),
    ("ClusterRoleBinding cluster-wide", SA, rbac.Attributes("list", resource="secrets"), True),
    (
        "Group via RoleBinding of a ClusterRole",
        ALICE,
        rbac.Attributes("get", resource="secrets", namespace="dev"),
        True,
    ),
    ("RoleBinding not cluster-wide", ALICE, rbac.Attributes("get", resource="secrets"), False),
    ("verb not granted", SA, rbac.Attributes("delete", resource="secrets", namespace="site"), False),
    (
        "unbound user",
        authn.User("bob", groups=(authn.AUTHENTICATED,)),
        rbac.Attributes("get", resource="secrets", namespace="dev"),
        False,
    ),
]


@pytest.mark.parametrize(("id_", "user", "attrs", "allowed"), AUTHORIZE_CASES)
def test_authorize(id_: str, user: authn.User, attrs: rbac.Attributes, allowed: bool) -> None:
    got, reason = rbac.authorize(user, attrs, OBJECTS)
    assert got is allowed, id_
    assert reason.startswith("RBAC: allowed by ") if allowed and user != authn.ADMIN else reason == ""


def test_reason_names_the_binding() -> None:
    _, reason = rbac.authorize(SA, rbac.Attributes("create", resource="events", namespace="site"), OBJECTS)
    assert (
        reason == 'RBAC: allowed by RoleBinding "agent/site" of Role "agent" to ServiceAccount "agent/site"'
    )
    _, reason = rbac.authorize(SA, rbac.Attributes("list", resource="secrets"), OBJECTS)
    assert reason == (
        'RBAC: allowed by ClusterRoleBinding "sa-read" of ClusterRole "read-secrets" '
        'to ServiceAccount "agent/site"'
    )
    _, reason = rbac.authorize(ALICE, rbac.Attributes("get", resource="secrets", namespace="dev"), OBJECTS)
    assert (
        reason == 'RBAC: allowed by RoleBinding "devs-read/dev" of ClusterRole "read-secrets" to Group "devs"'
    )


def test_token_file() -> None:
    users = authn.parse_token_file('t1,alice,1,"devs,ops"\n\n# comment\nt2,bob,2\n')
    assert users["t1"] == authn.User("alice", "1", ("devs", "ops", authn.AUTHENTICATED))
    assert users["t2"] == authn.User("bob", "2", (authn.AUTHENTICATED,))
    assert authn.identify(users, "Bearer t1").name == "alice"
    assert authn.identify(users, "Bearer sandbox") is authn.ADMIN
    assert authn.identify(users, "") is authn.ADMIN


def test_token_file_error_names_the_line() -> None:
    with pytest.raises(ValueError, match=r"tokens.csv:2: expected token,user,uid"):
        authn.parse_token_file("t1,alice,1\nlonely\n", source="tokens.csv")


# Through the API: the same objects and questions, as SelfSubjectAccessReviews of the admin
# impersonating each user, on each backend. The objects' namespaces and cluster-scoped names are
# made the test's own (a shared real cluster); the reasons are the pure authorizer's, renamed.


async def _store_objects(backend: backends.Backend, names: dict[str, str]) -> None:
    rbac_group = "rbac.authorization.k8s.io"
    kinds = (
        ("Role", "roles", OBJECTS.roles),
        ("ClusterRole", "clusterroles", OBJECTS.cluster_roles),
        ("RoleBinding", "rolebindings", OBJECTS.role_bindings),
        ("ClusterRoleBinding", "clusterrolebindings", OBJECTS.cluster_role_bindings),
    )
    async with backend.http() as http:
        for kind, plural, objs in kinds:
            for obj in objs:
                body = json.loads(_renamed(json.dumps(obj), names))
                body.update(apiVersion=f"{rbac_group}/v1", kind=kind)
                if "roleRef" in body:  # what the real server requires and the tables leave out
                    body["roleRef"]["apiGroup"] = rbac_group
                    for subject in body["subjects"]:
                        subject.setdefault(
                            "apiGroup", "" if subject["kind"] == "ServiceAccount" else rbac_group
                        )
                namespace = body["metadata"].get("namespace")
                where = f"namespaces/{namespace}/" if namespace else ""
                async with http.post(
                    f"{backend.url}/apis/{rbac_group}/v1/{where}{plural}", json=body
                ) as resp:
                    assert resp.status == 201, await resp.text()


def _renamed(text: str, names: dict[str, str]) -> str:
    """``text`` (JSON, or an authorizer's reason) with every quoted name of ``names``, a
    ServiceAccount's namespace after its name included, and a ServiceAccount's user renamed."""
    for old, new in names.items():
        text = text.replace(f'"{old}"', f'"{new}"').replace(f'/{old}"', f'/{new}"')
        text = text.replace(f"serviceaccount:{old}:", f"serviceaccount:{new}:")
    return text


async def _review(backend: backends.Backend, user: authn.User, attrs: rbac.Attributes) -> tuple[bool, str]:
    fields = ("verb", "group", "resource", "subresource", "namespace", "name")
    spec = {"resourceAttributes": {f: getattr(attrs, f) for f in fields if getattr(attrs, f)}}
    headers: list[tuple[str, str]] = []
    if user != authn.ADMIN:  # the admin asks as itself
        headers = [("Impersonate-User", user.name)]
        headers += [("Impersonate-Group", g) for g in user.groups if g != authn.AUTHENTICATED]
    url = f"{backend.url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    async with backend.http() as http, http.post(url, json={"spec": spec}, headers=headers) as resp:
        assert resp.status == 201, await resp.text()
        status = (await resp.json())["status"]
    return bool(status.get("allowed")), str(status.get("reason") or "")


async def test_authorize_through_reviews(backend: backends.Backend) -> None:
    names = {
        "site": await backend.new_namespace("site"),
        "dev": await backend.new_namespace("dev"),
        **{n: f"{n}-{uuid.uuid4().hex[:8]}" for n in ("read-secrets", "sa-read")},
    }
    await _store_objects(backend, names)
    for id_, user, attrs, allowed in AUTHORIZE_CASES:
        ok, reason = rbac.authorize(user, attrs, OBJECTS)
        assert ok is allowed, id_
        asked = dataclasses.replace(attrs, namespace=names.get(attrs.namespace, attrs.namespace))
        asker = dataclasses.replace(user, name=_renamed(user.name, names))
        assert await _review(backend, asker, asked) == (ok, _renamed(reason, names)), id_
