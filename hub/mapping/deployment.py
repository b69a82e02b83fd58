"""RKCP components and ``deployment`` → the TenantControlPlane's ``controlPlane.deployment``.

Owns the Deployment part of the mapping, as the Kamaji CAPI provider maps its
KamajiControlPlane (``controllers/kamajicontrolplane_controller_tcp.go``): per component
(``apiServer``, ``controllerManager``, ``scheduler``, ``kine``) its extra arguments, resources,
volume mounts and image name go into ``extraArgs``, ``resources``, ``additionalVolumeMounts``
and ``registrySettings``; ``registry`` into ``registrySettings.registry``; the ``deployment``
fields keep their names, except ``extraInitContainers``/``extraContainers``/``extraVolumes`` →
``additionalInitContainers``/``additionalContainers``/``additionalVolumes``. ``hub.mapping.tcp``
puts it into the TCP spec. Pure and deterministic.

Where the provider always writes a struct (``extraArgs: {}``, empty resources, the default
registry), empty values are left out here, as Go's ``omitempty`` would for a field: Kamaji
treats both alike, and an unchanged RKCP keeps mapping to the spec it mapped to before. A
container port without a protocol gets ``TCP`` written out, the default the site would store.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from hub.api import components, rkcp

COMPONENTS: Final = (
    ("apiServer", "api_server"),
    ("controllerManager", "controller_manager"),
    ("scheduler", "scheduler"),
)
"""Kamaji's key of each control-plane container, and the RKCP spec's attribute for it."""

IMAGES: Final = {
    "apiServer": "apiServerImage",
    "controllerManager": "controllerManagerImage",
    "scheduler": "schedulerImage",
}
"""``containerImageName`` of a component → its key in ``registrySettings``."""

# deployment fields: the RKCP's (Python) name → Kamaji's key.
PASSED: Final = (
    ("node_selector", "nodeSelector"),
    ("runtime_class_name", "runtimeClassName"),
    ("service_account_name", "serviceAccountName"),
    ("strategy", "strategy"),
    ("affinity", "affinity"),
    ("tolerations", "tolerations"),
    ("topology_spread_constraints", "topologySpreadConstraints"),
    ("extra_init_containers", "additionalInitContainers"),
    ("extra_containers", "additionalContainers"),
    ("extra_volumes", "additionalVolumes"),
)


def _set(out: dict[str, Any], key: str, value: Any) -> None:
    """``out[key]`` = a copy of ``value`` when it says something (not None, not empty)."""
    if value:
        out[key] = copy.deepcopy(value)


def _components(spec: rkcp.Spec, deployment: dict[str, Any]) -> None:
    args: dict[str, Any] = {}
    resources: dict[str, Any] = {}
    mounts: dict[str, Any] = {}
    registry: dict[str, Any] = {}
    _set(registry, "registry", spec.registry)
    for key, attribute in COMPONENTS:
        component: components.Component | None = getattr(spec, attribute)
        if component is None:
            continue
        _set(args, key, component.extra_args)
        _set(resources, key, component.resources)
        _set(mounts, key, component.extra_volume_mounts)
        _set(registry, IMAGES[key], component.container_image_name)
    if spec.kine is not None:
        _set(args, "kine", spec.kine.extra_args)
        _set(resources, "kine", spec.kine.resources)
    _set(deployment, "registrySettings", registry)
    _set(deployment, "extraArgs", args)
    _set(deployment, "resources", resources)
    _set(deployment, "additionalVolumeMounts", mounts)
    _set(deployment, "probes", _probes(spec))


def _probes(spec: rkcp.Spec) -> dict[str, Any]:
    """``probes``: ``deployment.probes`` for every container, each component's over them.

    Each one that is set goes; the provider sends none unless the deployment's and all three
    components' are set, which drops a lone ``apiServer.probes`` silently: we do not copy that.
    """
    out: dict[str, Any] = {}
    if spec.deployment is not None and spec.deployment.probes is not None:
        out.update(spec.deployment.probes.to_dict())
    for key, attribute in COMPONENTS:
        component: components.Component | None = getattr(spec, attribute)
        if component is not None and component.probes is not None:
            _set(out, key, component.probes.to_dict())
    return {k: v for k, v in out.items() if v}


CONTAINER_LISTS: Final = frozenset({"additionalInitContainers", "additionalContainers"})


def _with_port_protocols(containers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Containers whose ports name their protocol, ``TCP`` where they did not: Kamaji's CRD
    defaults it at the site, and the agent compares a list whole with what it applied, so a
    list stored with a default the intent lacks would look edited on every pass."""
    out = copy.deepcopy(containers)
    for container in out:
        for port in container.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
    return out


def deployment(spec: rkcp.Spec) -> dict[str, Any]:
    """``controlPlane.deployment``: replicas, the components, and the ``deployment`` fields."""
    out: dict[str, Any] = {"replicas": spec.replicas}
    _components(spec, out)
    wanted = spec.deployment
    if wanted is None:
        return out
    for attribute, key in PASSED:
        value = getattr(wanted, attribute)
        _set(out, key, _with_port_protocols(value) if key in CONTAINER_LISTS and value else value)
    for metadata, key in (
        (wanted.additional_metadata, "additionalMetadata"),
        (wanted.pod_additional_metadata, "podAdditionalMetadata"),
    ):
        if metadata is not None:
            _set(out, key, {k: v for k, v in metadata.to_dict().items() if v})
    return out
