"""Kubernetes API errors: one exception type that renders as a ``metav1.Status``.

Owns the mapping from what went wrong to the HTTP code, ``reason`` and message the real
kube-apiserver uses, so that clients (kubectl, kubernetes_asyncio, the sync client) classify
our errors exactly as they classify a real server's. Pure: no aiohttp, no store.

    ApiError
      ├── 400 BadRequest            bad_request()
      ├── 403 Forbidden             forbidden()
      ├── 404 NotFound              not_found()
      ├── 405 MethodNotAllowed      method_not_allowed()
      ├── 409 AlreadyExists         already_exists()
      ├── 409 Conflict              conflict()
      ├── 410 Expired (Gone)        expired()
      ├── 415 UnsupportedMediaType  unsupported_media_type()
      ├── 422 Invalid               invalid()
      └── 500 InternalError         internal()
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Cause:
    """One ``details.causes`` entry: ``field`` is the dotted path, ``reason`` e.g. FieldValueRequired."""

    reason: str
    message: str
    field: str

    def render(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}


@dataclass
class ApiError(Exception):
    """An error answered to the client as a Status object with ``code``."""

    code: int
    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(resource: str, name: str, group: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": resource}
    if group:
        details["group"] = group
    return details


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, name: str, *, group: str = "") -> ApiError:
    return ApiError(
        404, "NotFound", f'{_qualified(resource, group)} "{name}" not found', _details(resource, name, group)
    )


def already_exists(resource: str, name: str, *, group: str = "") -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(resource, group)} "{name}" already exists',
        _details(resource, name, group),
    )


def conflict(resource: str, name: str, *, group: str = "", why: str = "") -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {why}',
        _details(resource, name, group),
    )


def invalid(kind: str, name: str, causes: list[Cause], *, group: str = "") -> ApiError:
    qualified = f"{kind}.{group}" if group else kind
    rendered = [cause.render() for cause in causes]
    summary = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    # Empty name, group and kind are left out, as Go's omitempty leaves them.
    details: dict[str, Any] = {k: v for k, v in (("name", name), ("group", group), ("kind", kind)) if v}
    details["causes"] = [cause.to_dict() for cause in causes]
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {summary}', details)


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(resource: str, name: str, message: str, *, group: str = "") -> ApiError:
    return ApiError(
        403,
        "Forbidden",
        f'{_qualified(resource, group)} "{name}" is forbidden: {message}',
        _details(resource, name, group),
    )


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(message: str) -> ApiError:
    return ApiError(415, "UnsupportedMediaType", message)


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")


def apply_conflicts(found: list[tuple[str, list[str]]]) -> ApiError:
    """409 for an Apply that would change fields of other managers (each: who, its paths)."""
    total = sum(len(paths) for _, paths in found)
    causes = [
        Cause("FieldManagerConflict", f"conflict with {who}", path) for who, paths in found for path in paths
    ]
    if total == 1:
        ((who, [path]),) = found
        message = f"Apply failed with 1 conflict: conflict with {who}: {path}"
    else:
        parts = [f"conflicts with {who}:\n" + "\n".join(f"- {p}" for p in paths) for who, paths in found]
        message = f"Apply failed with {total} conflicts: " + "\n".join(parts)
    return ApiError(409, "Conflict", message, {"causes": [c.to_dict() for c in causes]})
