"""The InfraCluster's ``spec.controlPlaneEndpoint``: whether to write it, and what to write. Pure.

Many infrastructure providers wait for the control-plane provider to fill their InfraCluster's
``spec.controlPlaneEndpoint`` (the Kamaji provider patches a list of kinds by name). The hub does
it for any kind: once the endpoint is known and the owner Cluster is not paused, it plans a
``PatchInfraEndpoint`` for the Cluster's ``infrastructureRef``; the shell
(``hub.controllers.rkcp.infra``) reads the object, merge-patches only that field when it is unset or
different (``endpoint_patch``), checks that the server kept it (``carries``) and records the
``vocabulary.Outcome``. An outcome is kept per RKCP so an endpoint already written is not looked at again,
and a refusal (the kind has no such field, RBAC, a webhook) is reported once and retried only
after ``REFUSED_RETRY_SECONDS``: no retry storm against a kind that will never take it.

The reference is tenant input and the hub may patch any InfraCluster kind in every namespace, so
``ref_problem`` admits only an object of the infrastructure group, with a kind, version and name
Kubernetes would accept (a name of ``../other-ns/...`` would otherwise walk the request path into
another namespace), in the Cluster's own namespace (the shell refuses a cluster-scoped kind), and
only for an RKCP whose intent is not blocked (``hub.reconcile.rkcp.decide``).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING, Any, Final

from hub.api import cluster as cluster_api
from hub.reconcile.rkcp import vocabulary
from protocol import messages

if TYPE_CHECKING:
    from hub.reconcile.rkcp.vocabulary import Observed

REFUSED_RETRY_SECONDS: Final = 600.0
"""A refused patch is tried again after this long (a CRD upgrade or an RBAC fix may let it in)."""
WAITING_RETRY_SECONDS: Final = 15.0
"""The object (or its kind) is not there yet, or the API did not answer: look again after this."""

GROUP: Final = "infrastructure.cluster.x-k8s.io"
"""The only group whose objects the hub writes (its RBAC grants get/patch there, nowhere else)."""
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_VERSION = re.compile(r"v[0-9]+((alpha|beta)[0-9]+)?")
_KIND = re.compile(r"[A-Z][A-Za-z0-9]*")


def decide_infra(o: Observed, status: messages.Status | None) -> list[vocabulary.Action]:
    """The patch to plan, if any: the endpoint (the RKCP's, else the one the site reports in
    ``status``) on the owner Cluster's infrastructureRef, unless paused (the Cluster, or the RKCP's
    ``cluster.x-k8s.io/paused`` annotation) or already done for that object and endpoint."""
    cluster = o.cluster
    if (
        cluster is None
        or cluster_api.pause_message(cluster, o.rkcp)
        or cluster.spec.infrastructure_ref is None
    ):
        return []
    ref = cluster.spec.infrastructure_ref
    spec_endpoint = o.rkcp.spec.control_plane_endpoint
    endpoint: tuple[str, int] | None = None
    if spec_endpoint is not None and spec_endpoint.is_set:
        endpoint = (spec_endpoint.host, spec_endpoint.port)
    elif status is not None and status.endpoint is not None:
        endpoint = (status.endpoint.host, status.endpoint.port)
    if endpoint is None or not endpoint[0] or endpoint[1] <= 0 or not (ref.group and ref.kind and ref.name):
        return []
    target = vocabulary.PatchInfraEndpoint(
        group=ref.group,
        version=ref.version,
        kind=ref.kind,
        name=ref.name,
        namespace=cluster.metadata.namespace,
        host=endpoint[0],
        port=endpoint[1],
    )
    return [target] if due(o.infra_outcome, target, now=o.now) else []


def ref_problem(t: vocabulary.PatchInfraEndpoint) -> str:
    """Why the hub must not write the object ``t`` names ("" when it may): the Cluster's
    ``spec.infrastructureRef`` is tenant input."""
    where = "Cluster spec.infrastructureRef"
    if t.group != GROUP:
        return f"{where} names group {t.group!r}: only {GROUP} objects are written"
    if not _KIND.fullmatch(t.kind) or len(t.kind) > 63:
        return f"{where}.kind {t.kind!r} is not a Kubernetes kind"
    if t.version and not _VERSION.fullmatch(t.version):
        return f"{where}.apiVersion names version {t.version!r}, which is not a Kubernetes API version"
    if not _SUBDOMAIN.fullmatch(t.name) or len(t.name) > 253:
        return f"{where}.name {t.name!r} is not a Kubernetes object name (DNS-1123 subdomain)"
    return ""


def due(last: vocabulary.Outcome | None, target: vocabulary.PatchInfraEndpoint, *, now: dt.datetime) -> bool:
    """Whether ``target`` is to be attempted now, given the last outcome."""
    if last is None or last.target != target:
        return True
    if last.state == "set":
        return False
    wait = REFUSED_RETRY_SECONDS if last.state == "refused" else WAITING_RETRY_SECONDS
    return (now - last.at).total_seconds() >= wait


def current(obj: dict[str, Any]) -> tuple[str, int] | None:
    """The object's ``spec.controlPlaneEndpoint`` (None: absent, or CAPI's ``{"", 0}`` "unset")."""
    found = (obj.get("spec") or {}).get("controlPlaneEndpoint")
    if not isinstance(found, dict):
        return None
    host, port = found.get("host"), found.get("port")
    if not isinstance(host, str) or not host or not isinstance(port, int) or port <= 0:
        return None
    return host, port


def endpoint_patch(obj: dict[str, Any], host: str, port: int) -> dict[str, Any] | None:
    """The JSON merge patch that sets only ``spec.controlPlaneEndpoint`` (None: it already is that).

    The resourceVersion read is part of it: a concurrent writer makes it a Conflict, not a blind
    overwrite of an endpoint the provider just set."""
    if current(obj) == (host, port):
        return None
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    patch: dict[str, Any] = {"spec": {"controlPlaneEndpoint": {"host": host, "port": port}}}
    if rv:
        patch["metadata"] = {"resourceVersion": rv}
    return patch


def carries(obj: dict[str, Any], host: str, port: int) -> bool:
    """Whether the object the server returned kept the endpoint (a schema without the field prunes
    it silently where the server ignores ``fieldValidation``)."""
    return current(obj) == (host, port)


def describe(t: vocabulary.PatchInfraEndpoint) -> str:
    """``FooCluster default/name`` (what events name)."""
    return f"{t.kind} {t.namespace}/{t.name}"
