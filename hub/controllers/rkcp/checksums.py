"""The checksum of every CAPI Secret the hub writes, kept from a watch so a reconcile needs no GET.

Owns a map from a Secret's (namespace, name) to its ``writing.CHECKSUM_ANNOTATION``; a
``common.kube.informer`` sink, fed by a watch of the Secrets carrying the CAPI cluster-name label
(``run``). Talks to the management cluster through that informer only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from common import kube as ckube
from common import objects
from common.kube import informer, resources
from hub.controllers.rkcp import writing
from protocol import names

Key = objects.Key


class SecretChecksums:
    def __init__(self) -> None:
        self._checksums: dict[Key, str] = {}
        self.synced = asyncio.Event()
        """Set once the Secrets were listed: until then every checksum would look missing."""

    def known(self) -> Iterable[Key]:
        return list(self._checksums)

    def upsert(self, key: Key, obj: dict[str, Any]) -> None:
        notes = (obj.get("metadata") or {}).get("annotations") or {}
        self._checksums[key] = str(notes.get(writing.CHECKSUM_ANNOTATION) or "")

    def written(self, namespace: str, cluster: str, checksum: str) -> None:
        """The hub just wrote ``cluster``'s kubeconfig and CA Secrets with ``checksum``: known at
        once, so a reconcile before the watch brings them back does not write them again."""
        for secret in (names.capi_kubeconfig(cluster), names.capi_ca(cluster)):
            self._checksums[(namespace, secret)] = checksum

    def delete(self, key: Key) -> None:
        self._checksums.pop(key, None)

    def of_cluster(self, namespace: str, cluster: str) -> dict[str, str]:
        """The checksums of ``cluster``'s kubeconfig and CA Secrets, by name (those that exist)."""
        return {
            secret: self._checksums[(namespace, secret)]
            for secret in (names.capi_kubeconfig(cluster), names.capi_ca(cluster))
            if (namespace, secret) in self._checksums
        }

    async def run(self, kube: ckube.Kube, namespace: str | None) -> None:
        await informer.inform(
            kube,
            resources.SECRET,
            self,
            namespace=namespace,
            label_selector=writing.CLUSTER_NAME_LABEL,
            synced=self.synced.set,
        )
