"""RemoteKamajiControlPlane (+ its owner Cluster) → TenantControlPlane spec, and where it lives.

Owns the field mapping from RKCP to TCP, which follows the reference provider
(clastix/cluster-api-control-plane-provider-kamaji): ``tcp_spec`` is the exact ``spec`` the hub
puts into a provision intent, ``coordinates`` is the (site, namespace, name) it goes to, and
``desired`` the two together with why there is no spec to send (no Cluster, a name the site
cannot use, an intent too large).
Pure and deterministic: equal inputs give equal dicts, so the hub can compare the desired spec
with the one it last published and stay silent on a resync.

The network fields are ``hub.mapping.network``'s, ``controlPlane.deployment`` is
``hub.mapping.deployment``'s; this module assembles them with the version, kubelet, admission
controllers, DataStore and addons. Mapping choices that are ours (the reference provider's Go
structs decide them implicitly):

- ``networkProfile``, ``kubernetes.kubelet`` and ``controlPlane.service`` are always present, so
  Kamaji's CRD defaults (port 6443, CIDRs, cluster.local) apply inside them, and the kubelet
  settings the hub sends are the ones the site runs.
- Optional fields left empty (certSANs, service labels/annotations, dataStoreName, extraArgs,
  ...) are left out rather than sent empty, as Go's ``omitempty`` would.
- ``admissionControllers`` is sent only when set: unset means Kamaji's default list, while an
  explicit ``[]`` asks for none.
- Addons are sent only when at least one is enabled; an enabled addon may be ``{}``.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from common import objects
from hub.api import cluster as cluster_api
from hub.api import components, machinery
from hub.api import rkcp as api
from hub.mapping import deployment, network
from protocol import messages
from protocol.coordinates import Coordinates


class InvalidCoordinates(ValueError):
    """The RKCP's defaults give a name the site cannot use (the message says which field to set)."""


def coordinates(rkcp: api.RemoteKamajiControlPlane) -> Coordinates:
    """(site, namespace, name) of the TenantControlPlane at the site.

    The namespace defaults to the RKCP's own namespace, the name to the RKCP's name. An RKCP name
    may be a DNS-1123 subdomain (dots, a leading digit) that Kamaji refuses as a TCP name: then
    this raises InvalidCoordinates asking for ``spec.tenantControlPlaneName``.
    """
    spec = rkcp.spec
    namespace = spec.target_namespace or rkcp.metadata.namespace
    name = spec.tenant_control_plane_name or rkcp.metadata.name
    if not namespace or not machinery.dns1123_label(namespace):
        raise InvalidCoordinates(
            f"target namespace {namespace!r} is not a DNS-1123 label: set spec.targetNamespace"
        )
    if not machinery.dns1035_label(name):
        raise InvalidCoordinates(
            f"TenantControlPlane name {name!r} is not a DNS-1035 label (a letter, then lower-case letters, "
            "digits or '-', at most 63): set spec.tenantControlPlaneName"
        )
    return Coordinates(spec.site, namespace, name)


def kubernetes_version(version: str) -> str:
    """``1.31.0`` → ``v1.31.0`` (Kamaji wants the ``v``); ``v1.31.0`` unchanged."""
    return version if version.startswith("v") else f"v{version}"


def _kubernetes(spec: api.Spec) -> dict[str, Any]:
    kubernetes: dict[str, Any] = {
        "version": kubernetes_version(spec.version),
        # Model defaults fill what the user left out: the kubelet default, field by field.
        "kubelet": spec.kubelet.to_dict(),
    }
    if spec.admission_controllers is not None:
        kubernetes["admissionControllers"] = list(spec.admission_controllers)
    return kubernetes


def tcp_spec(rkcp: api.RemoteKamajiControlPlane, cluster: cluster_api.Cluster | None) -> dict[str, Any]:
    """The TenantControlPlane ``spec`` for ``rkcp``, with the network fields of its owner ``cluster``.

    ``cluster`` None (no owner Cluster yet) maps the RKCP alone; the hub waits for the owner before
    publishing, this only keeps the function total.
    """
    spec = rkcp.spec
    control_plane: dict[str, Any] = {
        "deployment": deployment.deployment(spec),
        "service": network.service(spec.network),
    }
    for key, exposed in (
        ("ingress", network.ingress(spec.network)),
        ("gateway", network.gateway(spec.network)),
    ):
        if exposed is not None:
            control_plane[key] = exposed
    tcp: dict[str, Any] = {
        "controlPlane": control_plane,
        "kubernetes": _kubernetes(spec),
        "networkProfile": network.network_profile(spec, cluster),
    }
    _data_store(spec, tcp)
    addons = _addons(spec.addons)
    if addons:
        tcp["addons"] = addons
    return tcp


def _data_store(spec: api.Spec, tcp: dict[str, Any]) -> None:
    for key, value in (
        ("dataStore", spec.data_store_name),
        ("dataStoreSchema", spec.data_store_schema),
        ("dataStoreUsername", spec.data_store_username),
    ):
        if value:
            tcp[key] = value
    if spec.data_store_overrides:
        tcp["dataStoreOverrides"] = [override.to_dict() for override in spec.data_store_overrides]


def _addons(addons: components.Addons) -> dict[str, Any]:
    """Kamaji's addons: the RKCP's, less CoreDNS's ``dnsServiceIPs`` (they go to the networkProfile)."""
    out = addons.to_dict()
    if "coreDNS" in out:
        out["coreDNS"].pop("dnsServiceIPs", None)
    return out


# The annotation kubectl apply keeps the whole last applied object in: the provider does not
# copy it to the TCP (it describes the RKCP, and can be large).
LAST_APPLIED: Final = objects.LAST_APPLIED
# Keys of our own domain on the RKCP are the hub's record (an owner identity, ...), not the
# user's metadata; at the site the same domain is the agent's, which refuses an intent naming it.
OWN_DOMAIN: Final = "kamaji-broker.io"


def _propagated(key: str) -> bool:
    prefix = key.rpartition("/")[0]
    return key != LAST_APPLIED and prefix != OWN_DOMAIN and not prefix.endswith(f".{OWN_DOMAIN}")


def tcp_metadata(rkcp: api.RemoteKamajiControlPlane) -> dict[str, dict[str, str]]:
    """Labels and annotations of the TCP, as the provider propagates them from its control plane:
    all the labels, all the annotations but kubectl's last-applied configuration; never a key of
    the ``kamaji-broker.io`` domain. The intent carries them; the agent merges them with what
    others set on the TCP (``agent.tcp.propagation``)."""
    meta = rkcp.metadata
    return {
        "labels": {k: v for k, v in meta.labels.items() if _propagated(k)},
        "annotations": {k: v for k, v in meta.annotations.items() if _propagated(k)},
    }


def metadata_problem(metadata: dict[str, dict[str, str]], spec: dict[str, Any] | None = None) -> str:
    """Why ``tcp_metadata``'s result (with ``spec``, the TCP spec, when given) cannot travel in an
    intent ("" when it can): Kubernetes bounds each key and value already (an annotation may take
    256 KiB), the intent bounds how many (the agent's first defense) and, with the spec, how many
    bytes of JSON (``messages.MAX_INTENT_BODY``: the rest of the intents stream's largest message
    is the envelope's). Too large, the part that takes the most is named, with its size."""
    for kind in ("labels", "annotations"):
        count = len(metadata.get(kind) or {})
        if count > messages.MAX_METADATA:
            return (
                f"metadata.{kind}: {count} entries, more than the {messages.MAX_METADATA} "
                "kamaji-broker carries to the TenantControlPlane"
            )
    sizes = {
        "spec": len(msgspec.json.encode(spec or {})),
        "metadata.labels": len(msgspec.json.encode(metadata.get("labels") or {})),
        "metadata.annotations": len(msgspec.json.encode(metadata.get("annotations") or {})),
    }
    total = sum(sizes.values())
    if total <= messages.MAX_INTENT_BODY:
        return ""
    largest = max(sizes, key=lambda part: sizes[part])
    return (
        f"{largest}: {sizes[largest]} bytes of JSON; the TenantControlPlane's spec, labels and "
        f"annotations take {total} bytes, more than the {messages.MAX_INTENT_BODY} an intent carries "
        "to the site"
    )


def owner_cluster(r: api.RemoteKamajiControlPlane) -> str:
    """The name of the CAPI Cluster that owns ``r`` ("" while none does)."""
    for ref in r.metadata.owner_references:
        if ref.kind == "Cluster" and ref.api_version.startswith("cluster.x-k8s.io/"):
            return ref.name
    return ""


def desired(
    r: api.RemoteKamajiControlPlane, cluster: cluster_api.Cluster | None, problem: str
) -> tuple[Coordinates, dict[str, Any] | None, str, str]:
    """The coordinates, the TCP spec to send (None when none can be), why none can be and its
    Ready reason: no usable Cluster (``problem``), a name the site cannot use, or an intent
    larger than the stream carries."""
    why = "WaitingForCluster"
    try:
        coords = coordinates(r)
    except InvalidCoordinates as exc:
        problem, why = (problem, why) if problem else (str(exc), "InvalidCoordinates")
        coords = Coordinates(r.spec.site, r.metadata.namespace, r.metadata.name)
    spec = tcp_spec(r, cluster) if cluster is not None and not problem else None
    if not problem:
        problem, why = metadata_problem(tcp_metadata(r), spec), "IntentTooLarge"
    return coords, None if problem else spec, problem, why
