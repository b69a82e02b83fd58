"""Install CustomResourceDefinitions on a cluster, as ``kubectl apply`` of CRD files would.

Owns turning CRD YAML files (the sandbox's compact ones in ``sandbox.crds``, or Kamaji's real
one) into created-or-replaced ``apiextensions.k8s.io/v1`` objects, then waiting until the API
server serves each resource. Works on any cluster: it only uses the public REST API.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from sandbox.kamaji import kube

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
        name = str(crd["metadata"]["name"])
        await _create_or_replace(api, name, crd)
        names.append(name)
    async with asyncio.timeout(timeout):
        for crd in documents:
            spec = crd["spec"]
            for version in spec["versions"]:
                if version.get("served", True):
                    await _until_served(api, spec["group"], version["name"], spec["names"]["plural"])
    return names


async def _until_served(api: kube.Kube, group: str, version: str, plural: str) -> None:
    # Polling, because there is nothing to wait on: the API server exposes no event for
    # "now serving"; a watch on the CRD's Established condition is not portable to every cluster.
    delay = 0.05
    while not await api.serves(group, version, plural):
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


async def _create_or_replace(api: kube.Kube, name: str, crd: Mapping[str, Any]) -> None:
    # Create first: the common case on a fresh cluster is one request. On AlreadyExists, replace
    # with the current resourceVersion; a concurrent writer makes that Conflict, so read again.
    for _ in range(5):
        try:
            await api.create_crd(crd)
            return
        except kube.Conflict:
            pass
        existing = await api.get_crd(name)
        if existing is None:
            continue
        body = dict(crd)
        body["metadata"] = {**crd["metadata"], "resourceVersion": existing["metadata"]["resourceVersion"]}
        try:
            await api.replace_crd(name, body)
            return
        except kube.Conflict:
            continue
    raise kube.Conflict(409, "Conflict", f"CustomResourceDefinition {name} kept changing while replacing it")
