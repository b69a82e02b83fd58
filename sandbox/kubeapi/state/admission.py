"""What a write does to an object before it is stored: identity, metadata, per-kind rules, schema.

Owns the per-resource admission the real apiserver applies on create and update: apiVersion/kind
checks, which part of a PUT counts when status is a subresource, metadata validation (names,
labels), Secret ``stringData`` folding and ``data`` checks, Namespace defaults, CRD validation
(``resources.from_crd``) and, for custom resources, what ``validating`` checks. Pure: mutates
only the object it is given and raises ``errors.ApiError``.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from sandbox.kubeapi import errors, options
from sandbox.kubeapi.kinds import resources, validating
from sandbox.kubeapi.state import metadata, objects, watching

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

_ANNOTATIONS_MAX = 256 * 1024  # TotalAnnotationSizeLimitB of the real apiserver
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def check_identity(rtype: resources.ResourceType, obj: dict[str, Any], *, version: str) -> None:
    """apiVersion and kind must match the endpoint (when given); then set both to storage values."""
    expected = rtype.api_version(version)
    if obj.get("apiVersion") and obj["apiVersion"] != expected:
        raise errors.bad_request(
            f"the API version in the data ({obj['apiVersion']}) does not match the expected API version "
            f"({expected})"
        )
    if obj.get("kind") and obj["kind"] != rtype.kind:
        raise errors.bad_request(
            f"the kind in the data ({obj['kind']}) does not match the expected kind ({rtype.kind})"
        )
    obj["apiVersion"] = rtype.api_version(rtype.storage_version)
    obj["kind"] = rtype.kind


def name_causes(rtype: resources.ResourceType, name: str) -> list[errors.Cause]:
    if rtype.plural == "namespaces":
        ok, msg, limit = bool(_LABEL.fullmatch(name)), _LABEL_MSG, 63
    elif rtype.plural == "events":  # Event names are free-form path segments (pod.<hash>, ...)
        ok, msg, limit = "/" not in name and name not in (".", ".."), "may not contain '/'", 253
    else:
        ok, msg, limit = bool(_SUBDOMAIN.fullmatch(name)), _SUBDOMAIN_MSG, 253
    if not ok:
        return [errors.Cause("FieldValueInvalid", f'Invalid value: "{name}": {msg}', "metadata.name")]
    if len(name) > limit:
        return [
            errors.Cause(
                "FieldValueInvalid",
                f'Invalid value: "{name}": must be no more than {limit} characters',
                "metadata.name",
            )
        ]
    return []


def _label_key_ok(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (not _SUBDOMAIN.fullmatch(prefix) or len(prefix) > 253):
        return False
    return bool(_QUALIFIED.fullmatch(name)) and len(name) <= 63


def metadata_causes(rtype: resources.ResourceType, meta: dict[str, Any]) -> list[errors.Cause]:
    causes = name_causes(rtype, str(meta.get("name", "")))
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        return [
            *causes,
            errors.Cause("FieldValueTypeInvalid", "Invalid value: must be a map", "metadata.labels"),
        ]
    causes += _label_causes(labels)
    causes += _annotation_causes(meta.get("annotations") or {})
    for key in ("finalizers",):
        if not isinstance(meta.get(key) or [], list):
            causes.append(
                errors.Cause("FieldValueTypeInvalid", "Invalid value: must be a list", f"metadata.{key}")
            )
    return causes


def _label_causes(labels: dict[str, Any]) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    for key, value in labels.items():
        if not _label_key_ok(key):
            causes.append(
                errors.Cause(
                    "FieldValueInvalid",
                    f'Invalid value: "{key}": name part must consist of '
                    "alphanumeric characters, '-', '_' or '.'",
                    "metadata.labels",
                )
            )
        if not isinstance(value, str) or not _LABEL_VALUE.fullmatch(value) or len(value) > 63:
            causes.append(
                errors.Cause(
                    "FieldValueInvalid",
                    f'Invalid value: "{value}": a valid label must be an '
                    "empty string or consist of alphanumeric characters, '-', '_' or '.'",
                    f"metadata.labels[{key}]",
                )
            )
    return causes


def _annotation_causes(annotations: Any) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    if (
        isinstance(annotations, dict)
        and sum(len(k) + len(str(v)) for k, v in annotations.items()) > _ANNOTATIONS_MAX
    ):
        # What makes a client-side `kubectl apply` of a big CRD fail on a real cluster, too.
        causes.append(
            errors.Cause(
                "FieldValueTooLong",
                f"Too long: may not be more than {_ANNOTATIONS_MAX} bytes",
                "metadata.annotations",
            )
        )
    if not isinstance(annotations, dict) or not all(isinstance(v, str) for v in annotations.values()):
        causes.append(
            errors.Cause(
                "FieldValueTypeInvalid", "Invalid value: values must be strings", "metadata.annotations"
            )
        )
    return causes


def merge_subresource(
    rtype: resources.ResourceType, current: watching.Entry, body: dict[str, Any], subresource: str
) -> dict[str, Any]:
    """What a PUT replaces: only status through ``/status``, else all but a status subresource."""
    if subresource == "status":
        new = objects.copy_obj(current)
        if "status" in body:
            new["status"] = body["status"]
        else:
            new.pop("status", None)
        return new
    if rtype.has_status:
        body.pop("status", None)
        if "status" in current.obj:
            body["status"] = objects.copy_obj(current)["status"]
    return body


def _secret(obj: dict[str, Any]) -> list[errors.Cause]:
    data = obj.get("data") or {}
    for key, text in (obj.pop("stringData", None) or {}).items():
        data[key] = base64.b64encode(str(text).encode()).decode()
    for key, value in data.items():
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, TypeError, ValueError) as exc:
            raise errors.bad_request(f"illegal base64 data in Secret data[{key}]") from exc
    if data:
        obj["data"] = data
    obj.setdefault("type", "Opaque")
    return []


def _namespace(obj: dict[str, Any]) -> list[errors.Cause]:
    meta = obj["metadata"]
    meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name", "")
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj.setdefault("status", {}).setdefault("phase", "Active")
    return []


def admit(
    rtype: resources.ResourceType,
    obj: dict[str, Any],
    *,
    version: str,
    write: options.Write = options.PLAIN_WRITE,
) -> None:
    """Normalise ``obj`` in place for storage; raise 422 Invalid (or 400) when it is not acceptable.

    ``write.field_validation`` is the request's fieldValidation (Warn, the server default, appends
    one message per pruned unknown field to ``write.warnings``; Strict rejects them with 400).
    """
    meta = metadata.of(obj)
    causes = metadata_causes(rtype, meta)
    if rtype.crd_name:
        sink = write.warnings if write.warnings is not None else []
        causes += validating.custom(
            rtype, obj, version, field_validation=write.field_validation, warnings=sink
        )
    elif rtype.key == ("", "secrets"):
        causes += _secret(obj)
    elif rtype.key == ("", "namespaces"):
        causes += _namespace(obj)
    elif rtype.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
        resources.from_crd(obj)  # raises 422 for an invalid CRD
    if causes:
        raise errors.invalid(rtype.kind, str(meta.get("name", "")), causes, group=rtype.group)
