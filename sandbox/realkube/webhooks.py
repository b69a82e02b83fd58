"""A controller's webhooks registered by URL: pure, tested by tables.

Kamaji's Helm chart and Cluster API's components register their admission webhooks against a
Service in front of the controller's pod (controller-gen writes the rules: which path checks or
defaults which resource, on which operations, failing open or closed), and Cluster API's CRDs
send conversions to the same Service. Here the controller is a process on this machine (or in a
network namespace of it), so each webhook keeps its rules and calls ``https://<host>:<port><path>``
instead, trusting the CA of the certificate the controller serves, as envtest registers a
controller's webhooks; a CRD's conversion calls ``/convert`` there.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

__all__ = ["CONVERSION_PATH", "configuration", "conversion"]

CONVERSION_PATH = "/convert"
"""Where controller-runtime's webhook server converts between a CRD's versions."""


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


def conversion(crd: dict[str, Any], *, host: str, port: int, ca_pem: bytes) -> dict[str, Any]:
    """``crd`` converting through ``https://host:port/convert``, trusting ``ca_pem``; a CRD that
    serves one version needs no conversion and is returned unchanged."""
    versions = (crd.get("spec") or {}).get("versions") or []
    if len(versions) < 2:
        return crd
    out = copy.deepcopy(crd)
    out["spec"]["conversion"] = {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {
                "url": f"https://{host}:{port}{CONVERSION_PATH}",
                "caBundle": base64.b64encode(ca_pem).decode(),
            },
            "conversionReviewVersions": ["v1", "v1beta1"],
        },
    }
    return out
