"""A pydantic JSON Schema as a Kubernetes *structural* OpenAPI v3 schema, for ``hub.api.crds``.

Owns the translation: every node typed, no ``$ref``, no ``anyOf`` for optionality,
``x-kubernetes-preserve-unknown-fields`` for free-form objects, docstrings as descriptions.
A model shape Kubernetes cannot express fails with ``SchemaError`` naming the JSON path, rather
than giving a schema the API server would refuse. Pure: talks to nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

import pydantic

Schema = dict[str, Any]

# Keywords a structural schema node may carry after translation; anything else pydantic emits
# (const, $ref, anyOf for unions, ...) means a model uses a shape Kubernetes cannot express, and
# generation fails rather than writing a schema the API server would refuse.
ALLOWED: Final = frozenset(
    {
        "type",
        "format",
        "description",
        "default",
        "enum",
        "pattern",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "properties",
        "required",
        "items",
        "additionalProperties",
        "nullable",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type",
        "x-kubernetes-int-or-string",
        "x-kubernetes-validations",
    }
)


class SchemaError(ValueError):
    """A model cannot be written as a structural schema; the message names the JSON path."""


def _resolve(node: Schema, defs: Mapping[str, Schema]) -> Schema:
    # A $ref with siblings (a field's description or default next to a model's $ref): the
    # field's keys win over the referenced model's, as pydantic intends.
    node = dict(node)
    if "allOf" in node and len(node["allOf"]) == 1:
        node = {**node.pop("allOf")[0], **node}
    ref = node.pop("$ref", None)
    if ref is not None:
        name = str(ref).rsplit("/", 1)[-1]
        node = {**_resolve(defs[name], defs), **node}
    return node


def _drop_null(node: Schema, path: str) -> Schema:
    # ``X | None = None`` becomes anyOf [X, null] with default null. In a CRD an absent field is
    # the "None", and the wire form never carries nulls (Model.to_dict drops them), so the field
    # is simply X, not nullable.
    options = node.get("anyOf")
    if options is None:
        return node
    if node.get("x-kubernetes-int-or-string"):
        # ``int | str`` marked as Kubernetes' IntOrString: the marker is its whole schema.
        return {k: v for k, v in node.items() if k != "anyOf"}
    rest = [o for o in options if o != {"type": "null"}]
    if len(rest) != 1:
        raise SchemaError(f"{path}: unions are not structural (anyOf {options!r})")
    merged = {**rest[0], **{k: v for k, v in node.items() if k != "anyOf"}}
    if merged.get("default", ...) is None:
        del merged["default"]
    return merged


def _description(text: str) -> str:
    # Docstrings wrap at the code's line length; `kubectl explain` wraps by itself, so keep only
    # paragraph breaks. reStructuredText literals (``x``) read better as Markdown there.
    paragraphs = (" ".join(p.split()) for p in text.split("\n\n"))
    return "\n\n".join(p for p in paragraphs if p).replace("``", "`")


def _convert(node: Schema, defs: Mapping[str, Schema], path: str) -> Schema:
    node = _drop_null(_resolve(node, defs), path)
    node = _resolve(node, defs)  # again: the branch anyOf left behind may itself be a $ref
    node.pop("title", None)
    if "description" in node:
        node["description"] = _description(str(node["description"]))
    additional = node.get("additionalProperties")
    if additional is True or (additional == {} and node.get("type") == "object"):
        # Free-form object (dict[str, Any], or a model with extra="allow"): keep what the user
        # wrote instead of pruning it; additionalProperties must not sit next to properties.
        del node["additionalProperties"]
        node["x-kubernetes-preserve-unknown-fields"] = True
    elif additional is False:
        del node["additionalProperties"]
    elif isinstance(additional, dict):
        node["additionalProperties"] = _convert(additional, defs, f"{path}[*]")
    if "properties" in node:
        node["properties"] = {
            key: _convert(sub, defs, f"{path}.{key}") for key, sub in node["properties"].items()
        }
    if isinstance(node.get("items"), dict):
        node["items"] = _convert(node["items"], defs, f"{path}[]")
    unexpected = set(node) - ALLOWED
    if unexpected:
        raise SchemaError(f"{path}: keywords a structural schema cannot carry: {sorted(unexpected)}")
    if "type" not in node and not (
        node.get("x-kubernetes-preserve-unknown-fields") or node.get("x-kubernetes-int-or-string")
    ):
        raise SchemaError(f"{path}: every node of a structural schema needs a type")
    if "properties" in node and "additionalProperties" in node:
        raise SchemaError(f"{path}: properties and additionalProperties are mutually exclusive")
    return node


def schema(json_schema: Schema, *, path: str = "") -> Schema:
    """A pydantic ``model_json_schema()`` as a structural schema (raises SchemaError if impossible)."""
    copied = copy.deepcopy(json_schema)
    defs: Mapping[str, Schema] = copied.pop("$defs", {})
    return _convert(copied, defs, path or ".")


def of(model: type[pydantic.BaseModel], *, path: str) -> Schema:
    """The structural schema of ``model`` as it validates input (what the API server checks)."""
    return schema(model.model_json_schema(mode="validation"), path=path)
