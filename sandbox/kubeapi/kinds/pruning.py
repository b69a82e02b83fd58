"""Pruning and defaulting of custom objects by their structural schema (before validation).

Owns the first two steps of what the apiextensions-apiserver does to a custom object on every
write, in its order: prune unknown fields (and ``null`` in non-nullable fields; ObjectMeta is
coerced to its known fields, ``x-kubernetes-preserve-unknown-fields`` and
``x-kubernetes-embedded-resource`` keep what they keep), then apply ``default`` values.
``schema.validate`` comes after. Pure: mutates only the object it is given.
"""

from __future__ import annotations

import copy
from typing import Any

from sandbox.kubeapi.kinds.schema import ROOT_FIELDS, Schema

#: ObjectMeta fields kept by the metadata coercion of custom objects; anything else is pruned.
OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)


# Pruning ------------------------------------------------------------------------------------


def prune(obj: dict[str, Any], schema: Schema) -> list[str]:
    """Drop, in place, the fields ``schema`` does not declare; returns their paths (for fieldValidation).

    The root keeps apiVersion, kind and metadata (metadata is coerced to ObjectMeta's fields).
    """
    dropped: list[str] = []
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for key in [k for k in meta if k not in OBJECT_META_FIELDS]:
            del meta[key]
            dropped.append(f"metadata.{key}")
    _prune_object(obj, schema, "", dropped, keep=ROOT_FIELDS)
    return dropped


def _prune_object(
    obj: dict[str, Any], schema: Schema, path: str, dropped: list[str], *, keep: tuple[str, ...] = ()
) -> None:
    props: dict[str, Schema] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    embedded = bool(schema.get("x-kubernetes-embedded-resource"))
    for key in list(obj):
        if key in keep or (embedded and key in ROOT_FIELDS):
            continue
        sub = props.get(key)
        if sub is None and isinstance(additional, dict):
            sub = additional
        where = f"{path}.{key}" if path else key
        if sub is None:
            if not preserve and additional is not True:
                del obj[key]
                dropped.append(where)
            continue
        if obj[key] is None and not sub.get("nullable"):
            del obj[key]
            continue
        _prune_value(obj[key], sub, where, dropped)


def _prune_value(value: Any, schema: Schema, path: str, dropped: list[str]) -> None:
    if schema.get("x-kubernetes-int-or-string"):
        return
    if isinstance(value, dict) and (schema.get("type") == "object" or "properties" in schema):
        _prune_object(value, schema, path, dropped)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _prune_value(item, schema["items"], f"{path}[{index}]", dropped)


# Defaulting ---------------------------------------------------------------------------------


def apply_defaults(obj: Any, schema: Schema) -> None:
    """Fill, in place, absent properties that have a ``default`` (recursively, into defaults too)."""
    if isinstance(obj, dict):
        props: dict[str, Schema] = schema.get("properties") or {}
        for key, prop in props.items():
            if key not in obj and "default" in prop:
                obj[key] = copy.deepcopy(prop["default"])
        additional = schema.get("additionalProperties")
        for key, value in obj.items():
            sub = props.get(key)
            if sub is None and isinstance(additional, dict):
                sub = additional
            if sub is not None:
                apply_defaults(value, sub)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            apply_defaults(item, schema["items"])
