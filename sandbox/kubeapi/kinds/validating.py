"""What a write of a custom resource is checked against, in the real server's order and words.

Owns prune → default → validate against the version's ``openAPIV3Schema`` (``pruning``,
``schema``; fieldValidation decides what a pruned unknown field is), then the ``scale``
subresource's own check of the replicas it serves, then what the real server says of its CEL
rules (``x-kubernetes-validations``) when it could not run them: the emulator never runs them
(see ``DEVIATIONS``), but where the real server would not have either (the object already failed
a check that blocks them) it answers the same. Pure: mutates only the object it is given.
"""

from __future__ import annotations

from typing import Any

from sandbox.kubeapi import errors
from sandbox.kubeapi.kinds import pruning, resources, schema

_INT32_MAX = 2**31 - 1
_BLOCKING = frozenset(
    {
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    }
)
"""The schema failures after which kube-apiserver does not run the CEL rules of an object."""
_RULES_NOT_CHECKED = errors.Cause(
    "FieldValueInvalid",
    "Invalid value: null: some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation",
    "<nil>",
)
_GO_TYPES = {
    str: "string",
    bool: "bool",
    float: "float64",
    dict: "map[string]interface {}",
    list: "[]interface {}",
}


def custom(
    rtype: resources.ResourceType,
    obj: dict[str, Any],
    version: str,
    *,
    field_validation: str,
    warnings: list[str],
) -> list[errors.Cause]:
    """Prune, default and validate ``obj`` in place; the causes of a 422, if any. A pruned
    unknown field is a warning under ``Warn``, a 400 under ``Strict``."""
    structural = rtype.schemas.get(version) or {}
    if not structural:
        return []
    unknown = [f'unknown field "{path}"' for path in pruning.prune(obj, structural)]
    if unknown and field_validation == "Strict":
        raise errors.bad_request(
            f'{rtype.kind} in version "{version}" cannot be handled as a {rtype.kind}: '
            "strict decoding error: " + ", ".join(unknown)
        )
    if field_validation == "Warn":
        warnings.extend(unknown)
    pruning.apply_defaults(obj, structural)
    causes = schema.validate(obj, structural) + scale_causes(rtype.scale, obj)
    if version in rtype.rules and any(c.reason in _BLOCKING for c in causes):
        causes.append(_RULES_NOT_CHECKED)
    return causes


def scale_causes(scale: resources.Scale | None, obj: dict[str, Any]) -> list[errors.Cause]:
    """The replicas the ``scale`` subresource serves must fit a Scale (apiextensions checks this
    after the schema, naming the field by the CRD's path, leading dot and all)."""
    causes: list[errors.Cause] = []
    for path in (scale.spec_replicas_path, scale.status_replicas_path) if scale else ():
        value: Any = obj
        for part in path.strip(".").split("."):
            value = value.get(part) if isinstance(value, dict) else None
        why = _replicas_problem(path, value)
        if why:
            shown = 0 if why.startswith(".") else value  # the accessor's zero value when unreadable
            causes.append(errors.Cause("FieldValueInvalid", f"Invalid value: {shown}: {why}", path))
    return causes


def _replicas_problem(path: str, value: Any) -> str:
    if value is None:
        return ""  # absent: read as 0
    if not isinstance(value, int) or isinstance(value, bool):
        got = _GO_TYPES.get(type(value), type(value).__name__)
        shown = str(value).lower() if isinstance(value, bool) else value
        return f"{path} accessor error: {shown} is of the type {got}, expected int64"
    if value < 0:
        return "should be a non-negative integer"
    if value > _INT32_MAX:
        return f"should be less than or equal to {_INT32_MAX}"
    return ""
