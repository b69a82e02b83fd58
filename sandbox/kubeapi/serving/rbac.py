"""RBAC (rbac.authorization.k8s.io/v1) evaluated as kube-apiserver's RBAC authorizer does.

``authorize`` answers whether a user may do what ``Attributes`` describe, from the Roles,
ClusterRoles, RoleBindings and ClusterRoleBindings stored in the emulator: a ClusterRoleBinding
grants its ClusterRole everywhere; a RoleBinding grants its Role (or a ClusterRole) in its own
namespace only. Rules match by verb, API group, resource (``foo/status`` for a subresource,
``*`` and ``*/status`` as wildcards) and resourceNames (which never match a request without a
name: list, watch, create); subjects are Users, Groups and ServiceAccounts
(``system:serviceaccount:<ns>:<name>``). ``system:masters`` is allowed everything. Aggregated
ClusterRoles are not expanded. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sandbox.kubeapi import authn

GROUP = "rbac.authorization.k8s.io"
Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Attributes:
    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    """A non-resource URL (``/version``), instead of a resource."""


@dataclass(frozen=True)
class Objects:
    """The RBAC objects of the cluster."""

    roles: tuple[Obj, ...] = ()
    cluster_roles: tuple[Obj, ...] = ()
    role_bindings: tuple[Obj, ...] = ()
    cluster_role_bindings: tuple[Obj, ...] = ()
    _by_name: dict[tuple[str, str, str], Obj] = field(default_factory=dict, init=False, compare=False)

    def role(self, kind: str, name: str, namespace: str) -> Obj | None:
        if not self._by_name:
            for r in self.roles:
                self._by_name[("Role", _ns(r), _name(r))] = r
            for r in self.cluster_roles:
                self._by_name[("ClusterRole", "", _name(r))] = r
        return self._by_name.get((kind, namespace if kind == "Role" else "", name))


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _ns(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def _has(values: Iterable[str], wanted: str) -> bool:
    values = list(values or ())
    return "*" in values or wanted in values


def rule_allows(rule: Obj, a: Attributes) -> bool:
    if not _has(rule.get("verbs") or (), a.verb):
        return False
    if a.path:
        return any(
            u == a.path or (u.endswith("*") and a.path.startswith(u[:-1]))
            for u in rule.get("nonResourceURLs") or ()
        )
    if not _has(rule.get("apiGroups") or (), a.group):
        return False
    wanted = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    granted = rule.get("resources") or ()
    if not any(r in ("*", wanted) or (a.subresource and r == f"*/{a.subresource}") for r in granted):
        return False
    names = rule.get("resourceNames") or ()
    return not names or (bool(a.name) and a.name in names)


def subject_matches(subject: Obj, user: authn.User, binding_namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return bool(name == user.name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return user.name == f"system:serviceaccount:{namespace}:{name}"
    return False


def _bindings(objects: Objects, namespace: str) -> Iterable[tuple[Obj, str]]:
    """Each binding that applies in ``namespace`` ("": cluster-wide) and where its role lives."""
    for b in objects.cluster_role_bindings:
        yield b, ""
    if namespace:
        for b in objects.role_bindings:
            if _ns(b) == namespace:
                yield b, namespace


def authorize(user: authn.User, a: Attributes, objects: Objects) -> tuple[bool, str]:
    """(allowed, reason): the reason names the binding and role that allowed it."""
    if authn.MASTERS in user.groups:
        return True, ""  # kube-apiserver's privileged-group authorizer gives no reason
    for binding, namespace in _bindings(objects, "" if a.path else a.namespace):
        subject = next(
            (s for s in binding.get("subjects") or () if subject_matches(s, user, _ns(binding))), None
        )
        if subject is None:
            continue
        ref = binding.get("roleRef") or {}
        role = objects.role(str(ref.get("kind") or ""), str(ref.get("name") or ""), namespace)
        if role is not None and any(rule_allows(r, a) for r in role.get("rules") or ()):
            return True, f"RBAC: allowed by {_describe(binding, namespace, subject)}"
    return False, ""


def _describe(binding: Obj, namespace: str, subject: Obj) -> str:
    """The binding and subject that allowed a request, in the real authorizer's words: a
    RoleBinding is ``name/namespace``, a ServiceAccount ``name/namespace`` too."""
    ref = binding.get("roleRef") or {}
    where = (
        f'RoleBinding "{_name(binding)}/{namespace}"'
        if namespace
        else f'ClusterRoleBinding "{_name(binding)}"'
    )
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "ServiceAccount":
        name = f"{name}/{subject.get('namespace') or namespace}"
    return f'{where} of {ref.get("kind")} "{ref.get("name")}" to {kind} "{name}"'
