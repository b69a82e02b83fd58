"""Kubernetes API errors, translated once at the edge (``client.translated``).

KubeError              any failed call; .status is the HTTP code (0: no answer)
├── NotFound           404 (.reason/.message tell what: the object, or its namespace)
├── Conflict           409 (stale resourceVersion, or AlreadyExists: .reason tells which)
├── Gone               410 (a watch or list resourceVersion expired: relist)
├── Invalid            422 (the object violates the schema; .message lists the fields)
└── Unavailable        no answer, 429 or 5xx: transient, retry with backoff
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final


class KubeError(Exception):
    def __init__(
        self, status: int, reason: str = "", message: str = "", details: Mapping[str, Any] | None = None
    ):
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.message = message
        self.details: Mapping[str, Any] = details or {}


class NotFound(KubeError):
    @property
    def kind(self) -> str:
        """The kind the 404 is about (``namespaces`` when the namespace itself is missing)."""
        return str(self.details.get("kind") or "")


class Conflict(KubeError):
    pass


class Gone(KubeError):
    pass


class Invalid(KubeError):
    @property
    def fields(self) -> tuple[str, ...]:
        """The fields the 422 names (``details.causes``), e.g. ``metadata.uid``."""
        causes = self.details.get("causes") or ()
        return tuple(str(c.get("field") or "") for c in causes if isinstance(c, Mapping))


class Unavailable(KubeError):
    pass


_BY_STATUS: Final[dict[int, type[KubeError]]] = {404: NotFound, 409: Conflict, 410: Gone, 422: Invalid}


def from_status(status: int, body: str | bytes | None, fallback_reason: str = "") -> KubeError:
    """A KubeError from an HTTP status and a Kubernetes ``Status`` body (if it is one)."""
    reason, message = fallback_reason, ""
    details: Mapping[str, Any] = {}
    if body:
        try:
            decoded = json.loads(body)
        except ValueError:
            decoded = None
        if isinstance(decoded, Mapping):
            reason = str(decoded.get("reason") or reason)
            message = str(decoded.get("message") or "")
            details = decoded.get("details") or {}
    kind = _BY_STATUS.get(status)
    if kind is None:
        kind = Unavailable if status in (0, 429) or status >= 500 else KubeError
    return kind(status, reason, message, details)
