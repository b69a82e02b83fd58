"""Structural OpenAPI v3 schemas of CustomResourceDefinitions: validation.

Owns the ``Schema`` type and the last step of what the apiextensions-apiserver does to a
custom object on every write (``pruning`` prunes and defaults first): validate types,
``required``, ``enum``, ``pattern`` and cheap ``format``\\s (``formats``), numeric and length
bounds, ``x-kubernetes-int-or-string``, ``x-kubernetes-list-type`` set/map uniqueness,
``anyOf``/``allOf``/``oneOf``/``not``, into ``errors.Cause`` entries whose messages follow the
real server's. CEL rules (``x-kubernetes-validations``) are not evaluated (documented
deviation). Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from sandbox.kubeapi import errors
from sandbox.kubeapi.kinds import formats

Schema = dict[str, Any]
#: The root fields every object has whatever its schema says (metadata is checked elsewhere).
ROOT_FIELDS = ("apiVersion", "kind", "metadata")


def validate(obj: dict[str, Any], schema: Schema) -> list[errors.Cause]:
    """Every schema violation of ``obj`` (metadata is validated elsewhere), in document order."""
    causes: list[errors.Cause] = []
    props: dict[str, Schema] = schema.get("properties") or {}
    for key in schema.get("required") or []:
        if key not in obj and key not in ROOT_FIELDS:
            causes.append(errors.Cause("FieldValueRequired", "Required value", key))
    for key, value in obj.items():
        if key in ROOT_FIELDS:
            continue
        if key in props:
            causes.extend(_validate(value, props[key], key))
    return causes


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _show(value: Any) -> str:
    """A value as the real server prints it after ``Invalid value:``."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _invalid(path: str, value: Any, why: str) -> errors.Cause:
    return errors.Cause("FieldValueInvalid", f"Invalid value: {_show(value)}: {why}", path)


def _type_ok(value: Any, wanted: str) -> bool:
    if wanted == "object":
        return isinstance(value, dict)
    if wanted == "array":
        return isinstance(value, list)
    if wanted == "string":
        return isinstance(value, str)
    if wanted == "boolean":
        return isinstance(value, bool)
    if wanted == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if wanted == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return True


def _validate(value: Any, schema: Schema, path: str) -> Iterator[errors.Cause]:
    """go-openapi's validators in its order: type, combinators, string, number, enum, object,
    array. A type error does not stop the others; each looks only at values of its own kind."""
    if value is None:
        if not schema.get("nullable") and (schema.get("type") or schema.get("x-kubernetes-int-or-string")):
            wanted = "integer,string" if schema.get("x-kubernetes-int-or-string") else schema["type"]
            yield _type_invalid(path, "null", wanted)
        return
    yield from _type_rules(value, schema, path)
    yield from _combinators(value, schema, path)
    if isinstance(value, str):
        yield from _string_rules(value, schema, path)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield from _number_rules(value, schema, path)
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_show(v) for v in schema["enum"])
        yield errors.Cause(
            "FieldValueNotSupported",
            f"Unsupported value: {_show(value)}: supported values: {supported}",
            path,
        )
    if isinstance(value, dict):
        yield from _object_rules(value, schema, path)
    elif isinstance(value, list):
        yield from _array_rules(value, schema, path)


def _type_invalid(path: str, got: str, wanted: str) -> errors.Cause:
    return errors.Cause(
        "FieldValueTypeInvalid",
        f'Invalid value: "{got}": {path} in body must be of type {wanted}: "{got}"',
        path,
    )


def _type_rules(value: Any, schema: Schema, path: str) -> Iterator[errors.Cause]:
    int_or_string = bool(schema.get("x-kubernetes-int-or-string"))
    wanted = "integer,string" if int_or_string else schema.get("type")
    ok = (
        (_type_ok(value, "integer") or isinstance(value, str))
        if int_or_string
        else _type_ok(value, wanted or "")
    )
    fmt = schema.get("format")
    if not ok and fmt and not isinstance(value, str | list):
        # A value that is neither a string nor a list is named by its Go format (int64,
        # float64, none for the others) against the schema's format, not by its type.
        go_format = {"integer": "int64", "number": "float64"}.get(_type_name(value), "")
        if go_format != fmt:
            yield _type_invalid(path, go_format, fmt)
            return
    if not ok and wanted:
        yield _type_invalid(path, _type_name(value), wanted)


def _checked(path: str, fmt: str) -> errors.Cause:
    shown = f"with format {fmt}" if fmt else "(default format)"
    return errors.Cause(
        "FieldValueInvalid",
        f'Invalid value: "": Checked value must be of type integer {shown} in {path}',
        "<nil>",
    )


def _composite(path: str, what: str) -> errors.Cause:
    """A failed combinator, as the real server reports it: no field, the path quoted."""
    return errors.Cause("FieldValueInvalid", f'Invalid value: "": "{path}" {what}', "<nil>")


def _string_rules(value: str, schema: Schema, path: str) -> Iterator[errors.Cause]:
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        yield errors.Cause(
            "FieldValueTooLong", f"Too long: may not be more than {schema['maxLength']} bytes", path
        )
    if "minLength" in schema and len(value) < schema["minLength"]:
        yield _invalid(path, value, f"{path} in body should be at least {schema['minLength']} chars long")
    if "pattern" in schema and not formats.compiled(schema["pattern"]).search(value):
        yield _invalid(path, value, f"{path} in body should match '{schema['pattern']}'")
    fmt = schema.get("format")
    if fmt and not formats.check_format(fmt, value):
        shown = _show(value)
        yield errors.Cause(
            "FieldValueTypeInvalid",
            f"Invalid value: {shown}: {path} in body must be of type {fmt}: {shown}",
            path,
        )


def _number_rules(value: float, schema: Schema, path: str) -> Iterator[errors.Cause]:
    if schema.get("type") == "integer":
        fmt = str(schema.get("format") or "")
        if (isinstance(value, float) and not value.is_integer()) or (
            fmt == "int32" and not -(2**31) <= value < 2**31
        ):
            yield _checked(path, fmt)
    if "minimum" in schema:
        low = schema["minimum"]
        if value < low or (schema.get("exclusiveMinimum") and value == low):
            rel = "greater than" if schema.get("exclusiveMinimum") else "greater than or equal to"
            yield _invalid(path, value, f"{path} in body should be {rel} {_show(low)}")
    if "maximum" in schema:
        high = schema["maximum"]
        if value > high or (schema.get("exclusiveMaximum") and value == high):
            rel = "less than" if schema.get("exclusiveMaximum") else "less than or equal to"
            yield _invalid(path, value, f"{path} in body should be {rel} {_show(high)}")
    if schema.get("multipleOf") and value % schema["multipleOf"]:
        yield _invalid(path, value, f"{path} in body should be a multiple of {_show(schema['multipleOf'])}")


def _combinators(value: Any, schema: Schema, path: str) -> Iterator[errors.Cause]:
    """allOf, anyOf, oneOf, not: in structural schemas these hold value validations only. A
    failed anyOf or oneOf also reports the errors of its first alternative (go-openapi's "best")."""
    if "allOf" in schema:
        results = [list(_validate(value, sub, path)) for sub in schema["allOf"]]
        yield from (cause for result in results for cause in result)
        if any(results):
            none = ". None validated" if all(results) else ""
            yield _composite(path, f"must validate all the schemas (allOf){none}")
    if schema.get("anyOf"):
        results = [list(_validate(value, sub, path)) for sub in schema["anyOf"]]
        if all(results):
            yield _composite(path, "must validate at least one schema (anyOf)")
            yield from results[0]
    if schema.get("oneOf"):
        results = [list(_validate(value, sub, path)) for sub in schema["oneOf"]]
        valid = sum(not r for r in results)
        if valid != 1:
            found = f"Found {valid} valid alternatives" if valid else "Found none valid"
            yield _composite(path, f"must validate one and only one schema (oneOf). {found}")
            yield from ([] if valid else results[0])
    if "not" in schema and not list(_validate(value, schema["not"], path)):
        yield _composite(path, "must not validate the schema (not)")


def _object_rules(value: dict[str, Any], schema: Schema, path: str) -> Iterator[errors.Cause]:
    props: dict[str, Schema] = schema.get("properties") or {}
    for key in schema.get("required") or []:
        if key not in value:
            yield errors.Cause("FieldValueRequired", "Required value", f"{path}.{key}")
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        yield errors.Cause(
            "FieldValueTooMany",
            f"Too many: {len(value)}: must have at most {schema['maxProperties']} items",
            path,
        )
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        yield _invalid(
            path, len(value), f"{path} in body should have at least {schema['minProperties']} properties"
        )
    additional = schema.get("additionalProperties")
    for key, item in value.items():
        if key in props:
            yield from _validate(item, props[key], f"{path}.{key}")
        elif isinstance(additional, dict):
            yield from _validate(item, additional, f"{path}.{key}")


def _array_rules(value: list[Any], schema: Schema, path: str) -> Iterator[errors.Cause]:
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        yield errors.Cause(
            "FieldValueTooMany", f"Too many: {len(value)}: must have at most {schema['maxItems']} items", path
        )
    if "minItems" in schema and len(value) < schema["minItems"]:
        yield _invalid(path, len(value), f"{path} in body should have at least {schema['minItems']} items")
    yield from _uniqueness(value, schema, path)
    items = schema.get("items")
    if isinstance(items, dict):
        for index, item in enumerate(value):
            yield from _validate(item, items, f"{path}[{index}]")


def _uniqueness(value: list[Any], schema: Schema, path: str) -> Iterator[errors.Cause]:
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set" or schema.get("uniqueItems"):
        seen: list[Any] = []
        for index, item in enumerate(value):
            if item in seen:
                yield errors.Cause(
                    "FieldValueDuplicate", f"Duplicate value: {_show(item)}", f"{path}[{index}]"
                )
            seen.append(item)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen_keys: set[str] = set()
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            identity = json.dumps({k: item.get(k) for k in keys}, sort_keys=True)
            if identity in seen_keys:
                yield errors.Cause(
                    "FieldValueDuplicate",
                    f"Duplicate value: {json.dumps({k: item.get(k) for k in keys}, separators=(',', ':'))}",
                    f"{path}[{index}]",
                )
            seen_keys.add(identity)


def has_rules(node: Any) -> bool:
    """Whether a schema (any part of it) has CEL rules, ``x-kubernetes-validations``."""
    if isinstance(node, dict):
        return "x-kubernetes-validations" in node or any(has_rules(v) for v in node.values())
    return isinstance(node, list) and any(has_rules(v) for v in node)
