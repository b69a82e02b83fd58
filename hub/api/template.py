"""``RemoteKamajiControlPlaneTemplate``: what a ClusterClass's ``controlPlane.ref`` points at.

Owns the template's pydantic models (CAPI's ControlPlaneTemplate contract: ``spec.template``
holds ``metadata`` labels and annotations and a ``spec``). The template's spec is the RKCP's
``hub.api.rkcp.Spec`` itself, field by field, less what does not belong in a template that many
Clusters share (``TOPOLOGY_FIELDS``, ``PER_CLUSTER_FIELDS``), with ``site`` optional (a
ClusterClass usually sets it from a variable by a patch). So a field added to the RKCP is in the
template the next time ``hub.api.crds`` runs, with the same schema, description and rules.
Pure: talks to nothing.
"""

from __future__ import annotations

import copy
from typing import Any, Final

import pydantic

from hub.api import machinery, rkcp

NAMES: Final = machinery.Names(
    group=rkcp.NAMES.group,
    version=rkcp.NAMES.version,
    kind=f"{rkcp.KIND}Template",
    categories=("cluster-api",),
    short_names=("rkcpt",),
)
API_VERSION: Final = NAMES.api_version
KIND: Final = NAMES.kind

TOPOLOGY_FIELDS: Final = frozenset({"version", "replicas"})
"""Set on the RKCP by CAPI's topology controller from ``Cluster.spec.topology`` (``version``,
``controlPlane.replicas``), as the Kamaji provider's template leaves them out too."""
PER_CLUSTER_FIELDS: Final = frozenset({"control_plane_endpoint", "tenant_control_plane_name"})
"""Meaningful for one Cluster only: the endpoint the hub writes once the site reports it, and a
TCP name (one name shared by every Cluster of a class would collide at the site)."""
EXCLUDED: Final = TOPOLOGY_FIELDS | PER_CLUSTER_FIELDS
OPTIONAL_FIELDS: Final = frozenset({"site"})
"""Required on the RKCP, optional here: a ClusterClass patch may set it per Cluster."""
KEPT_RULES: Final[list[pydantic.JsonValue]] = [
    machinery.rule("!has(oldSelf.site) || has(self.site)", "site cannot be removed"),
]
"""Once set, an optional field's own ``self == oldSelf`` binds only while it is there: without
this, ``site`` could be removed and then set to another site."""


def _field(name: str, info: Any) -> tuple[Any, Any]:
    """``(annotation, FieldInfo)`` of ``rkcp.Spec``'s field ``name``, as the template declares it."""
    copied = copy.copy(info)  # alias, description, constraints and schema extras, as the RKCP's
    if name in OPTIONAL_FIELDS:
        copied.default = None
        return info.annotation | None, copied
    return info.annotation, copied


def _rules() -> list[pydantic.JsonValue]:
    """The RKCP spec's CEL rules about fields the template has (the others cannot apply), and
    those that keep its optional fields once set."""
    aliases = {rkcp.Spec.model_fields[f].alias for f in EXCLUDED}
    return [r for r in rkcp.SPEC_RULES if not any(f"self.{a}" in str(r) for a in aliases)] + KEPT_RULES


class _Rules(machinery.Model):
    model_config = pydantic.ConfigDict(json_schema_extra={"x-kubernetes-validations": _rules()})


_DEFINITIONS: Final[dict[str, Any]] = {
    n: _field(n, f) for n, f in rkcp.Spec.model_fields.items() if n not in EXCLUDED
}
Fields: type[machinery.Model] = pydantic.create_model(
    "Fields",
    __base__=_Rules,
    __doc__="A RemoteKamajiControlPlane's spec as a template holds it: all but version, replicas, "
    "controlPlaneEndpoint and tenantControlPlaneName.",
    **_DEFINITIONS,
)


class TemplateMeta(machinery.Model):
    """Labels and annotations for the RKCP made from the template (CAPI's ``clusterv1.ObjectMeta``)."""

    labels: dict[str, str] | None = None
    """Labels the RKCP gets."""
    annotations: dict[str, str] | None = None
    """Annotations the RKCP gets."""


class TemplateResource(machinery.Model):
    """What an RKCP made from this template looks like."""

    metadata: TemplateMeta | None = None
    spec: Fields


class TemplateSpec(machinery.Model):
    """The template."""

    template: TemplateResource


class RemoteKamajiControlPlaneTemplate(machinery.Object):
    """A template of RemoteKamajiControlPlanes, for ClusterClasses (CAPI's ControlPlaneTemplate)."""

    api_version: str = API_VERSION
    kind: str = KIND
    spec: TemplateSpec
