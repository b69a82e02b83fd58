"""Resource types the emulator serves: the built-ins, and those read from CRDs.

Owns ``ResourceType`` (group, versions, kind, names, scope, verbs, subresources, per-version
schema and printer columns) and ``from_crd``, which turns a CustomResourceDefinition object
into one (and validates the CRD the way the apiextensions-apiserver does, coarsely). Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sandbox.kubeapi import errors
from sandbox.kubeapi.kinds import schema

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0
    format: str = ""


@dataclass(frozen=True)
class Scale:
    """The CRD ``scale`` subresource: where replicas live in the custom object."""

    spec_replicas_path: str
    status_replicas_path: str
    label_selector_path: str | None = None


@dataclass
class ResourceType:
    """One served resource (all its served versions share one storage)."""

    group: str
    versions: list[str]
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    list_kind: str = ""
    storage_version: str = ""
    has_status: bool = False
    scale: Scale | None = None
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The versions whose schema has CEL rules (x-kubernetes-validations), which are not run.
    rules: frozenset[str] = frozenset()
    printer_columns: dict[str, list[PrinterColumn]] = field(default_factory=dict)
    #: Custom resources and CRDs carry metadata.generation; Secrets and ConfigMaps do not.
    uses_generation: bool = True
    #: DELETE answers the deleted object (custom resources, namespaces) or a Status (Secrets, ...).
    returns_deleted_object: bool = True
    #: Extra fieldSelector fields besides metadata.name/metadata.namespace.
    field_selectors: frozenset[str] = frozenset()
    #: Set for resources served from a CRD (named by the CRD's metadata.name).
    crd_name: str = ""
    #: PUT of an absent object creates it (Events do this, most resources do not).
    create_on_update: bool = False

    def __post_init__(self) -> None:
        self.list_kind = self.list_kind or f"{self.kind}List"
        self.storage_version = self.storage_version or self.versions[0]

    @property
    def key(self) -> tuple[str, str]:
        """The storage identity: (group, plural)."""
        return (self.group, self.plural)

    @property
    def qualified(self) -> str:
        """``plural.group`` as used in error messages (``secrets`` for the core group)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version


#: The fieldSelector fields of core/v1 Events (what `kubectl get events --field-selector` uses).
_EVENT_FIELDS = frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }
)


def _builtin(
    kind: str,
    plural: str,
    *,
    group: str = "",
    namespaced: bool = True,
    short: list[str] | None = None,
    fields: frozenset[str] = frozenset(),
    **kw: Any,
) -> ResourceType:
    """A built-in v1 resource: no generation, DELETE answers a Status unless told otherwise."""
    kw.setdefault("uses_generation", False)
    kw.setdefault("returns_deleted_object", False)
    return ResourceType(
        group=group,
        versions=["v1"],
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        short_names=short or [],
        field_selectors=fields,
        **kw,
    )


def builtins() -> list[ResourceType]:
    """The built-in resources hub, agent and simulator use."""
    return [
        _builtin(
            "Namespace",
            "namespaces",
            namespaced=False,
            short=["ns"],
            fields=frozenset({"status.phase"}),
            returns_deleted_object=True,
            has_status=True,
        ),
        _builtin("Secret", "secrets", fields=frozenset({"type"})),
        _builtin("ConfigMap", "configmaps", short=["cm"]),
        _builtin("ServiceAccount", "serviceaccounts", short=["sa"]),
        _builtin("Event", "events", short=["ev"], fields=_EVENT_FIELDS, create_on_update=True),
        _builtin("Event", "events", group="events.k8s.io", short=["ev"], create_on_update=True),
        _builtin("Lease", "leases", group="coordination.k8s.io"),
        *_rbac(),
        # Created and answered, never stored (``serving.reviews``).
        _builtin(
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
            group="authorization.k8s.io",
            namespaced=False,
        ),
        _builtin(
            "CustomResourceDefinition",
            "customresourcedefinitions",
            group="apiextensions.k8s.io",
            namespaced=False,
            short=["crd", "crds"],
            categories=["api-extensions"],
            has_status=True,
            uses_generation=True,
            returns_deleted_object=True,
        ),
    ]


def _rbac() -> list[ResourceType]:
    """rbac.authorization.k8s.io/v1: stored, and read by SelfSubjectAccessReviews (``serving.rbac``)."""
    group = "rbac.authorization.k8s.io"
    return [
        _builtin("Role", "roles", group=group),
        _builtin("RoleBinding", "rolebindings", group=group),
        _builtin("ClusterRole", "clusterroles", group=group, namespaced=False),
        _builtin("ClusterRoleBinding", "clusterrolebindings", group=group, namespaced=False),
    ]


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _crd_causes(crd: dict[str, Any]) -> list[errors.Cause]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    causes: list[errors.Cause] = []

    def need(value: Any, path: str) -> None:
        if not value:
            causes.append(errors.Cause("FieldValueRequired", "Required value", path))

    need(spec.get("group"), "spec.group")
    need(names.get("plural"), "spec.names.plural")
    need(names.get("kind"), "spec.names.kind")
    need(spec.get("versions"), "spec.versions")
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(
            errors.Cause(
                "FieldValueNotSupported",
                f'Unsupported value: "{spec.get("scope", "")}": supported values: "Cluster", "Namespaced"',
                "spec.scope",
            )
        )
    name = (crd.get("metadata") or {}).get("name", "")
    if names.get("plural") and spec.get("group") and name != f"{names['plural']}.{spec['group']}":
        causes.append(
            errors.Cause(
                "FieldValueInvalid",
                f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
                "metadata.name",
            )
        )
    versions = spec.get("versions") or []
    if versions and sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(
            errors.Cause(
                "FieldValueInvalid",
                "Invalid value: must have exactly one version marked as storage version",
                "spec.versions",
            )
        )
    for index, version in enumerate(versions):
        if not _DNS_LABEL.fullmatch(str(version.get("name", ""))):
            causes.append(
                errors.Cause(
                    "FieldValueInvalid",
                    f'Invalid value: "{version.get("name", "")}": must be a DNS label',
                    f"spec.versions[{index}].name",
                )
            )
    return causes


def _scale(sub: dict[str, Any] | None) -> Scale | None:
    if sub is None:
        return None
    return Scale(sub["specReplicasPath"], sub["statusReplicasPath"], sub.get("labelSelectorPath"))


def from_crd(crd: dict[str, Any]) -> ResourceType:
    """The served resource of a CRD object; raises ApiError 422 when the CRD is invalid."""
    causes = _crd_causes(crd)
    if causes:
        raise errors.invalid(
            "CustomResourceDefinition",
            (crd.get("metadata") or {}).get("name", ""),
            causes,
            group="apiextensions.k8s.io",
        )
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec["versions"] if v.get("served", True)]
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    subresources = next((v.get("subresources") or {} for v in spec["versions"] if v.get("storage")), {})
    return ResourceType(
        group=spec["group"],
        versions=[v["name"] for v in served],
        kind=names["kind"],
        plural=names["plural"],
        singular=names.get("singular") or names["kind"].lower(),
        namespaced=spec["scope"] == "Namespaced",
        short_names=list(names.get("shortNames") or []),
        categories=list(names.get("categories") or []),
        list_kind=names.get("listKind") or f"{names['kind']}List",
        storage_version=storage,
        has_status="status" in subresources,
        scale=_scale(subresources.get("scale")),
        schemas={v["name"]: (v.get("schema") or {}).get("openAPIV3Schema") or {} for v in served},
        printer_columns={v["name"]: _columns(v.get("additionalPrinterColumns") or []) for v in served},
        rules=frozenset(v["name"] for v in served if schema.has_rules(v.get("schema"))),
        crd_name=crd["metadata"]["name"],
    )


def _columns(raw: list[dict[str, Any]]) -> list[PrinterColumn]:
    return [
        PrinterColumn(
            name=c["name"],
            type=c.get("type", "string"),
            json_path=c["jsonPath"],
            description=c.get("description", ""),
            priority=int(c.get("priority", 0)),
            format=c.get("format", ""),
        )
        for c in raw
    ]
