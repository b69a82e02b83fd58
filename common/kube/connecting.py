"""Making a Kubernetes client: the ApiClient of a kubeconfig file or of the pod's service account.

``connect`` is what hub and agent call: a ``Kube`` that owns its ApiClient (``Kube.close``
closes it), so the processes never hold a kubernetes_asyncio object themselves. The bare
``api_client_*`` functions are for callers that manage an ApiClient of their own (the sandbox,
tests, ``kamaji-broker site apply``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config

from common.kube.client import Kube, translated


async def connect(*, in_cluster: bool, kubeconfig: str | Path | None = None) -> Kube:
    """A ``Kube`` on the pod's service account (``in_cluster``) or on ``kubeconfig``; the caller
    closes it with ``Kube.close``."""
    if in_cluster:
        return Kube(api_client_in_cluster())
    return Kube(await api_client_from_kubeconfig(kubeconfig or ""))


_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def _without_netrc_lookups(api_client: Any) -> Any:
    """Stop aiohttp from reading ~/.netrc, in a thread, before every request.

    kubernetes_asyncio opens its session with ``trust_env=True`` for proxy variables; aiohttp
    then also looks up netrc credentials for each request that has no auth of its own, which
    every Kubernetes request is (the token travels in a header). Profiles of the agent and the
    Kamaji simulator showed a quarter of their CPU in that thread hop. With no proxy variable
    set, trust_env has nothing else to give, so it is turned off.
    """
    session = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    if (
        session is not None
        and hasattr(session, "_trust_env")
        and not any(os.environ.get(v) for v in _PROXY_VARIABLES)
    ):
        session._trust_env = False
    return api_client


async def api_client_from_kubeconfig(path: str | Path, *, context: str | None = None) -> Any:
    """A kubernetes_asyncio ApiClient for a kubeconfig file; the caller closes it."""
    with translated():
        return _without_netrc_lookups(
            await config.new_client_from_config(config_file=str(path), context=context)
        )


def api_client_in_cluster() -> Any:
    """An ApiClient from the pod's service account (in-cluster)."""
    config.load_incluster_config()  # type: ignore[no-untyped-call]
    return _without_netrc_lookups(client.ApiClient())
