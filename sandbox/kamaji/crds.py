"""Install CustomResourceDefinitions on a cluster, as ``kubectl apply`` of CRD files would.

Owns turning CRD YAML files (the sandbox's compact ones in ``sandbox.crds``, or Kamaji's real
one) into created-or-replaced ``apiextensions.k8s.io/v1`` objects, then waiting until the API
server serves each resource. Works on any cluster: it only uses the public REST API, through
``common.kube``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from common import kube
from common.kube import resources

__all__ = ["install", "load"]

# libyaml's loader when PyYAML has it: Kamaji's real CRD has 15,000 lines (~1 s in pure Python).
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Every CustomResourceDefinition document in ``paths`` (multi-document YAML allowed)."""
    found: list[dict[str, Any]] = []
    for path in paths:
        with open(path, encoding="utf-8") as stream:
            for document in yaml.load_all(stream, Loader=_LOADER):
                if isinstance(document, Mapping) and document.get("kind") == "CustomResourceDefinition":
                    found.append(dict(document))
    return found


async def install(
    api_client: Any,
    paths: Iterable[str | Path],
    *,
    timeout: float = 30.0,
) -> list[str]:
    """Create or replace the CRDs in ``paths`` through ``api_client`` (kubernetes_asyncio ApiClient).

    Returns the CRD names. Waits up to ``timeout`` seconds until every served version answers a
    list request, because a real API server serves a new CRD only once it is Established.
    """
    api = kube.Kube(api_client)
    documents = load(paths)
    names: list[str] = []
    for crd in documents:
        # Five attempts: a CRD another installer (or the API server's own status writer) changes
        # concurrently is read and replaced again rather than failing the install.
        await api.create_or_replace(resources.CUSTOM_RESOURCE_DEFINITION, crd, attempts=5)
        names.append(str(crd["metadata"]["name"]))
    async with asyncio.timeout(timeout):
        for crd in documents:
            for served in _served(crd):
                await _until_served(api, served)
    return names


def _served(crd: Mapping[str, Any]) -> list[resources.Resource]:
    """The resources a CRD defines, one per served version."""
    spec = crd["spec"]
    names = spec["names"]
    return [
        resources.Resource(
            spec["group"],
            version["name"],
            names["plural"],
            names["kind"],
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        )
        for version in spec["versions"]
        if version.get("served", True)
    ]


async def _until_served(api: kube.Kube, r: resources.Resource) -> None:
    # Polling, because there is nothing to wait on: the API server exposes no event for
    # "now serving"; a watch on the CRD's Established condition is not portable to every cluster.
    delay = 0.05
    while not await api.serves(r):
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)
