"""Writing the site's endpoint into the Cluster's InfraCluster, whatever its kind.

Owns the outcome of the last ``vocabulary.PatchInfraEndpoint`` per RKCP (``vocabulary.Outcome``, which
the next reconcile's decision reads: done once, refused reported once) and a cache of the
discovered resources. Talks to the management cluster: API discovery turns the reference's group
(and version, or the group's preferred one) and kind into a resource, the object is read, and only
its ``spec.controlPlaneEndpoint`` is merge-patched, with ``fieldValidation=Strict`` so a kind whose
schema lacks the field is refused rather than silently pruned. Events (``writing.record_event``)
say what happened, naming the kind and the reason.
"""

from __future__ import annotations

import datetime as dt
import logging

from common import kube as ckube
from common import logs, objects
from common.kube import errors as kerrors
from common.kube import resources
from hub.api import rkcp as api
from hub.controllers.rkcp import writing
from hub.reconcile.rkcp import infra, vocabulary

log = logging.getLogger(__name__)

Key = objects.Key
REFUSED_STATUSES = frozenset({400, 403, 405, 415, 422})
"""Answers that the same request will get again: the schema, RBAC or a webhook said no."""


class Refused(Exception):
    pass


class InfraEndpoints:
    def __init__(self, kube: ckube.Kube) -> None:
        self.kube = kube
        self._outcomes: dict[Key, vocabulary.Outcome] = {}
        self._resources: dict[tuple[str, str, str], resources.Resource] = {}
        """(group, version, kind) → resource, as discovered (a kind not found is asked again)."""

    def last(self, key: Key) -> vocabulary.Outcome | None:
        return self._outcomes.get(key)

    def forget(self, key: Key) -> None:
        self._outcomes.pop(key, None)

    async def patch(self, t: vocabulary.PatchInfraEndpoint, r: api.RemoteKamajiControlPlane) -> None:
        """Attempt ``t``; record the outcome, and an Event when it is news (set, or refused)."""
        what, changed = infra.describe(t), False
        try:
            changed = await self._attempt(t)
            state: vocabulary.State = "set"
            reason = f"spec.controlPlaneEndpoint of {what} is {t.host}:{t.port}"
        except Refused as exc:
            state, reason = "refused", f"{what}: {exc}"
        except kerrors.KubeError as exc:
            if exc.status in REFUSED_STATUSES:
                state, reason = "refused", f"{what}: the API server refused: {exc}"
            else:
                state, reason = "waiting", f"{what}: {exc}"
        key = (r.metadata.namespace, r.metadata.name)
        now = dt.datetime.now(dt.UTC)
        self._outcomes[key] = vocabulary.Outcome(target=t, state=state, reason=reason, at=now)
        about = logs.about(namespace=r.metadata.namespace, name=r.metadata.name, site=r.spec.site)
        if state == "refused":
            log.warning("InfraCluster endpoint for %s/%s not set: %s", *key, reason, extra=about)
            event = vocabulary.Event("Warning", "InfrastructureEndpointRefused", reason)
            await writing.record_event(self.kube, event, r)
        elif state == "set" and changed:
            event = vocabulary.Event("Normal", "InfrastructureEndpointSet", reason)
            await writing.record_event(self.kube, event, r)
        elif state == "waiting":
            log.info("InfraCluster endpoint for %s/%s: waiting for %s", *key, reason, extra=about)

    async def _attempt(self, t: vocabulary.PatchInfraEndpoint) -> bool:
        """Patch if unset or different; True when it was patched. Raises ``Refused`` or KubeError."""
        why = infra.ref_problem(t)
        if why:
            raise Refused(why)
        resource = await self._resource(t)
        if not resource.namespaced:
            raise Refused(
                f"kind {t.kind} is cluster-scoped: only an InfraCluster in the Cluster's namespace is written"
            )
        try:
            obj = await self.kube.get(resource, t.name, namespace=t.namespace)
        except kerrors.NotFound:
            # Not there yet, or its kind no longer served at that version: discover again next time.
            self._resources = {k: v for k, v in self._resources.items() if v != resource}
            raise
        patch = infra.endpoint_patch(obj, t.host, t.port)
        if patch is None:
            return False
        after = await self.kube.patch(
            resource, t.name, patch, namespace=t.namespace, field_validation="Strict"
        )
        if not infra.carries(after, t.host, t.port):
            raise Refused(f"the {t.kind} schema has no spec.controlPlaneEndpoint (the server dropped it)")
        return True

    async def _resource(self, t: vocabulary.PatchInfraEndpoint) -> resources.Resource:
        version = t.version
        if not version:
            served = await self.kube.group_versions(t.group)
            if not served:
                raise kerrors.NotFound(404, "NotFound", f"API group {t.group} is not served")
            version = served[0]
        found = self._resources.get((t.group, version, t.kind))
        if found is None:
            entries = await self.kube.api_resources(t.group, version)
            found = resources.discovered(t.group, version, entries, t.kind)
            if found is None:
                raise kerrors.NotFound(404, "NotFound", f"kind {t.kind} is not served in {t.group}/{version}")
            self._resources[(t.group, version, t.kind)] = found
        return found
