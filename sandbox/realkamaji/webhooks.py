"""Kamaji's admission webhooks, registered by URL: pure, tested by tables.

Kamaji's Helm chart registers its webhooks against a Service in front of the operator's pod
(controller-gen writes the rules: which path checks or defaults which resource, on which
operations, failing open or closed). Here the operator is a process on the site's network, so
each webhook keeps its rules and calls ``https://<host>:<port><path>`` instead, trusting the CA
of the certificate the operator serves, as envtest registers a controller's webhooks.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

__all__ = ["MUTATING", "VALIDATING", "configuration"]

MUTATING = ("MutatingWebhookConfiguration", "kamaji-mutating-webhook-configuration")
VALIDATING = ("ValidatingWebhookConfiguration", "kamaji-validating-webhook-configuration")


def _by_url(webhook: dict[str, Any], *, base: str, ca_pem: bytes) -> dict[str, Any]:
    out = copy.deepcopy(webhook)
    client = out.get("clientConfig") or {}
    service = client.get("service") or {}
    path = service.get("path")
    if not path:
        raise ValueError(f"webhook {out.get('name')!r} names no service path to call")
    out["clientConfig"] = {"url": base + path, "caBundle": base64.b64encode(ca_pem).decode()}
    return out


def configuration(
    kind_name: tuple[str, str], webhooks: list[dict[str, Any]], *, host: str, port: int, ca_pem: bytes
) -> dict[str, Any]:
    """The ``(kind, name)`` configuration of ``webhooks`` (controller-gen's list), each calling
    ``https://host:port`` + its path and trusting ``ca_pem``."""
    kind, name = kind_name
    base = f"https://{host}:{port}"
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [_by_url(w, base=base, ca_pem=ca_pem) for w in webhooks],
    }
