"""What every management-cluster API model of the hub is made of (after k8s.io/apimachinery).

Owns the pydantic base ``Model`` (camelCase on the wire, snake_case in Python, attribute
docstrings as field descriptions) and ``FreeForm`` (unknown fields kept), the object around a
spec and a status (``Object``: apiVersion, kind, ``ObjectMeta``, ``parse``), a custom resource's
names (``Names``), CEL rules for the CRD (``rule``, ``immutable``), and the name checks
Kubernetes applies (DNS-1123 and DNS-1035 labels, int32).
``hub.api.rkcp`` (RemoteKamajiControlPlane), ``hub.api.site`` (Site) and ``hub.api.cluster`` (Cluster
API's Cluster) build on it. Pure: talks to nothing.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Annotated, Any, Final, Self

import pydantic
from pydantic import alias_generators

import hub.conditions
from protocol import labels

# The patterns keep ^...$ because they go into the CRD's OpenAPI schema, where '$' is the end of
# the text (Go RE2, and the Rust engine behind pydantic's ``pattern``). Python's '$' also
# matches before a final newline, so Python code checks names with ``fullmatch``, never ``match``.
DNS1035_PATTERN: Final = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
"""A DNS-1035 label (Kamaji's webhook wants TCP names like this: a letter first)."""

_DNS1035: Final = re.compile(DNS1035_PATTERN)


def dns1123_label(value: str) -> bool:
    """Whether ``value`` is a DNS-1123 label (a namespace, a site)."""
    return labels.problem(value) is None


def dns1035_label(value: str) -> bool:
    """Whether ``value`` is a DNS-1035 label (a TenantControlPlane name)."""
    return len(value) <= 63 and _DNS1035.fullmatch(value) is not None


DNS1123Label = Annotated[
    str, pydantic.Field(min_length=1, max_length=labels.MAX_LENGTH, pattern=labels.PATTERN)
]
DNS1035Label = Annotated[str, pydantic.Field(min_length=1, max_length=63, pattern=DNS1035_PATTERN)]
Int32 = Annotated[int, pydantic.Field(json_schema_extra={"format": "int32"})]
Conditions = Annotated[
    list[hub.conditions.Condition],
    pydantic.Field(
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
    ),
]
"""A status's conditions: one per type (a map list keyed by ``type``, as ``metav1.Condition``s are)."""


def rule(expression: str, message: str) -> pydantic.JsonValue:
    """One CEL rule of an ``x-kubernetes-validations`` list."""
    return {"rule": expression, "message": message}


def immutable(what: str) -> dict[str, pydantic.JsonValue]:
    """``json_schema_extra`` of a field that keeps its first value (the rule binds once it is set)."""
    return {"x-kubernetes-validations": [rule("self == oldSelf", f"{what} is immutable")]}


@dataclass(frozen=True)
class Names:
    """How a custom resource is named: what its CRD declares and what its objects carry."""

    group: str
    version: str
    kind: str
    categories: tuple[str, ...]
    short_names: tuple[str, ...] = ()

    @property
    def singular(self) -> str:
        """The kind in lower case, as kubebuilder derives it (``remotekamajicontrolplane``)."""
        return self.kind.lower()

    @property
    def plural(self) -> str:
        """The resource's name in URLs and RBAC: the singular plus ``s`` (``sites``)."""
        return f"{self.singular}s"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


class Model(pydantic.BaseModel):
    """Base of every API model: camelCase on the wire, snake_case in Python."""

    model_config = pydantic.ConfigDict(
        alias_generator=alias_generators.to_camel, populate_by_name=True, use_attribute_docstrings=True
    )

    def to_dict(self) -> dict[str, Any]:
        """The wire form: camelCase keys, JSON values, unset (None) fields left out."""
        dumped: dict[str, Any] = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped


class FreeForm(Model):
    """A Kamaji object we pass through: unknown fields are kept (and preserved by the CRD)."""

    model_config = pydantic.ConfigDict(extra="allow")


class OwnerReference(Model):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(Model):
    """The ``metadata`` fields the hub reads."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    creation_timestamp: dt.datetime | None = None
    deletion_timestamp: dt.datetime | None = None
    labels: dict[str, str] = pydantic.Field(default_factory=dict)
    annotations: dict[str, str] = pydantic.Field(default_factory=dict)
    owner_references: list[OwnerReference] = pydantic.Field(default_factory=list)
    finalizers: list[str] = pydantic.Field(default_factory=list)


class ObjectReference(Model):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    namespace: str = ""
    uid: str = ""


class Object(Model):
    """An object of the API: ``apiVersion`` and ``kind`` (defaulted by each kind), ``metadata``."""

    api_version: str
    kind: str
    metadata: ObjectMeta = pydantic.Field(default_factory=ObjectMeta)

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> Self:
        """From the API server's dict; raises pydantic.ValidationError naming the bad fields."""
        return cls.model_validate(obj)
