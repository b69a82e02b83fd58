"""Names both sides agree on without sending them: the Secrets Kamaji writes and CAPI reads. Pure.

Kamaji writes, beside each TenantControlPlane ``<tcp>``, ``<tcp>-admin-kubeconfig`` (the admin
kubeconfig under ``admin.conf``) and ``<tcp>-ca``; the agent seals those two back. Cluster API
reads ``<cluster>-kubeconfig`` (key ``value``) and ``<cluster>-ca`` (``tls.crt``, ``tls.key``)
in the Cluster's namespace; the hub writes those.
"""

from __future__ import annotations

from typing import Final

ADMIN_KUBECONFIG_KEY: Final = "admin.conf"
"""The key of the admin kubeconfig in Kamaji's ``<tcp>-admin-kubeconfig`` Secret."""

KAMAJI_KUBECONFIG_SUFFIX: Final = "-admin-kubeconfig"
KAMAJI_CA_SUFFIX: Final = "-ca"

CAPI_KUBECONFIG_KEY: Final = "value"
"""The key of the kubeconfig in CAPI's ``<cluster>-kubeconfig`` Secret."""


def kamaji_kubeconfig(tcp: str) -> str:
    return tcp + KAMAJI_KUBECONFIG_SUFFIX


def kamaji_ca(tcp: str) -> str:
    return tcp + KAMAJI_CA_SUFFIX


def capi_kubeconfig(cluster: str) -> str:
    return f"{cluster}-kubeconfig"


def capi_ca(cluster: str) -> str:
    return f"{cluster}-ca"
