"""Generate the RemoteKamajiControlPlane, its Template and Site CRDs from the pydantic models in
``hub.api.rkcp``, ``hub.api.template`` and ``hub.api.site``.

Owns the CRD around each schema: names, CAPI contract labels, printer columns, the ``status``
and ``scale`` subresources, and the files in ``deploy/crds/``. The schemas themselves are the
models' as ``hub.api.openapi`` translates them. Talks to nothing but the files it writes.

    python -m hub.api.crds            # (re)write deploy/crds/<group>_<plural>.yaml, every kind
    python -m hub.api.crds --check    # exit 1 when a committed file differs from the models

``tests/hub/api/test_crds.py`` runs the comparison too, so the models and the CRD cannot drift.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import pydantic
import yaml

from hub.api import machinery, openapi, rkcp, site, template

FILENAME: Final = f"{rkcp.NAMES.group}_{rkcp.NAMES.plural}.yaml"
SITE_FILENAME: Final = f"{site.NAMES.group}_{site.NAMES.plural}.yaml"
"""The Site CRD's file, next to the RKCP's (``--output``'s directory)."""
TEMPLATE_FILENAME: Final = f"{template.NAMES.group}_{template.NAMES.plural}.yaml"
"""The RemoteKamajiControlPlaneTemplate CRD's file, next to the RKCP's."""
DEFAULT_OUTPUT: Final = Path("deploy") / "crds" / FILENAME


def _header(kind: str, source: str) -> str:
    return (
        f"# {kind} CRD. Generated from {source} by `python -m hub.api.crds`: do not edit\n"
        "# by hand (tests/hub/api/test_crds.py fails when this file and the models differ).\n"
    )


HEADER: Final = _header(rkcp.KIND, "hub/api/rkcp.py")
SITE_HEADER: Final = _header(site.KIND, "hub/api/site.py")
TEMPLATE_HEADER: Final = _header(template.KIND, "hub/api/template.py")


def _object_schema(
    kind: type[machinery.Object], spec: openapi.Schema, status: type[pydantic.BaseModel]
) -> openapi.Schema:
    """An object's ``openAPIV3Schema``: its docstring, apiVersion, kind, metadata, spec, status."""
    return {
        "description": (kind.__doc__ or "").strip(),
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion of this object."},
            "kind": {"type": "string", "description": "Kind of this object."},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": openapi.of(status, path="status"),
        },
    }


def open_api_schema() -> openapi.Schema:
    """The ``openAPIV3Schema`` of the RemoteKamajiControlPlane version."""
    spec = openapi.of(rkcp.Spec, path="spec")
    return {**_object_schema(rkcp.RemoteKamajiControlPlane, spec, rkcp.Status), "required": ["spec"]}


def site_open_api_schema() -> openapi.Schema:
    """The ``openAPIV3Schema`` of the Site version (spec optional: ``{}`` means the defaults)."""
    spec = {**openapi.of(site.SiteSpec, path="spec"), "default": {}}
    return _object_schema(site.Site, spec, site.SiteStatus)


def _crd(names: machinery.Names, *, scope: str, version: dict[str, Any]) -> dict[str, Any]:
    """The CustomResourceDefinition of ``names`` with its one served and stored ``version``."""
    listed: dict[str, Any] = {
        "kind": names.kind,
        "listKind": names.list_kind,
        "plural": names.plural,
        "singular": names.singular,
    }
    if names.short_names:
        listed["shortNames"] = list(names.short_names)
    listed["categories"] = list(names.categories)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{names.plural}.{names.group}"},
        "spec": {
            "group": names.group,
            "names": listed,
            "scope": scope,
            "versions": [{"name": names.version, "served": True, "storage": True, **version}],
        },
    }


def _column(name: str, type_: str, path: str, description: str) -> dict[str, str]:
    return {"name": name, "type": type_, "jsonPath": path, "description": description}


RKCP_COLUMNS: Final = [
    # KubeadmControlPlane's (v1beta1) columns, in its order, as other control-plane providers
    # print them, then where it runs. Cluster API labels the object with its Cluster's name.
    _column("Cluster", "string", ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']", "Cluster"),
    _column("Initialized", "boolean", ".status.initialized", "The control plane has been Ready once"),
    _column("API Server Available", "boolean", ".status.ready", "The tenant API server serves"),
    _column("Replicas", "integer", ".status.replicas", "API server pods at the site"),
    _column("Ready", "integer", ".status.readyReplicas", "API server pods that are ready"),
    _column("Updated", "integer", ".status.updatedReplicas", "API server pods with the desired spec"),
    _column("Unavailable", "integer", ".status.unavailableReplicas", "API server pods not available"),
    _column("Age", "date", ".metadata.creationTimestamp", "Time since creation"),
    _column("Version", "string", ".spec.version", "Kubernetes version of the control plane"),
    _column("Site", "string", ".spec.site", "Site running the TenantControlPlane"),
]
"""The RKCP's ``kubectl get`` columns."""


def crd() -> dict[str, Any]:
    """The RemoteKamajiControlPlane CustomResourceDefinition, as a dict."""
    made = _crd(
        rkcp.NAMES,
        scope="Namespaced",
        version={
            "subresources": {
                "status": {},
                "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector",
                },
            },
            "additionalPrinterColumns": RKCP_COLUMNS,
            "schema": {"openAPIV3Schema": open_api_schema()},
        },
    )
    # The CAPI contract: Cluster API resolves which of our versions implements each of its
    # contract versions from these labels.
    made["metadata"]["labels"] = {
        "cluster.x-k8s.io/v1beta1": rkcp.NAMES.version,
        "cluster.x-k8s.io/v1beta2": rkcp.NAMES.version,
    }
    return made


def site_crd() -> dict[str, Any]:
    """The Site CustomResourceDefinition (cluster-scoped, status subresource), as a dict."""
    column = _column
    return _crd(
        site.NAMES,
        scope="Cluster",
        version={
            "subresources": {"status": {}},
            "additionalPrinterColumns": [
                column("Connected", "boolean", ".status.connected", "The agent's heartbeat is fresh"),
                column("Heartbeat", "date", ".status.lastHeartbeatTime", "Time since the last heartbeat"),
                column("Backlog", "integer", ".status.backlog", "Intents the agent has not processed"),
                column("Control Planes", "integer", ".status.controlPlanes", "RKCPs placed here"),
                column("Agent Version", "string", ".status.agentVersion", "Version of the agent"),
                column("Age", "date", ".metadata.creationTimestamp", "Time since creation"),
            ],
            "schema": {"openAPIV3Schema": site_open_api_schema()},
        },
    )


def template_open_api_schema() -> openapi.Schema:
    """The ``openAPIV3Schema`` of the RemoteKamajiControlPlaneTemplate version (no status)."""
    return {
        "description": (template.RemoteKamajiControlPlaneTemplate.__doc__ or "").strip(),
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion of this object."},
            "kind": {"type": "string", "description": "Kind of this object."},
            "metadata": {"type": "object"},
            "spec": openapi.of(template.TemplateSpec, path="spec"),
        },
        "required": ["spec"],
    }


def template_crd() -> dict[str, Any]:
    """The RemoteKamajiControlPlaneTemplate CustomResourceDefinition (CAPI's ControlPlaneTemplate)."""
    made = _crd(
        template.NAMES,
        scope="Namespaced",
        version={
            "additionalPrinterColumns": [
                _column("Site", "string", ".spec.template.spec.site", "Site of the control planes"),
                _column("Age", "date", ".metadata.creationTimestamp", "Time since creation"),
            ],
            "schema": {"openAPIV3Schema": template_open_api_schema()},
        },
    )
    # The same CAPI contract labels as the RKCP's: ClusterClass resolves the version by them.
    made["metadata"]["labels"] = {
        "cluster.x-k8s.io/v1beta1": template.NAMES.version,
        "cluster.x-k8s.io/v1beta2": template.NAMES.version,
    }
    return made


def render() -> str:
    """The RKCP CRD file's text (header comment plus YAML, keys sorted so the output is stable)."""
    return HEADER + yaml.safe_dump(crd(), sort_keys=True, width=100)


def render_site() -> str:
    """The Site CRD file's text."""
    return SITE_HEADER + yaml.safe_dump(site_crd(), sort_keys=True, width=100)


def render_template() -> str:
    """The RemoteKamajiControlPlaneTemplate CRD file's text."""
    return TEMPLATE_HEADER + yaml.safe_dump(template_crd(), sort_keys=True, width=100)


def main(argv: Sequence[str] | None = None) -> int:
    summary = "Generate the RKCP, RKCP template and Site CRDs from the pydantic models in hub."
    parser = argparse.ArgumentParser(prog="python -m hub.api.crds", description=summary)
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help="the RKCP CRD file (%(default)s); the Site and template CRDs go next to it",
    )
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when one differs")
    args = parser.parse_args(argv)
    output: Path = args.output
    files = {
        output: render(),
        output.parent / SITE_FILENAME: render_site(),
        output.parent / TEMPLATE_FILENAME: render_template(),
    }
    if args.check:
        stale = [t for t, text in files.items() if (t.read_text() if t.is_file() else "") != text]
        for target in stale:
            print(f"{target} is out of date: run python -m hub.api.crds", file=sys.stderr)
        return 1 if stale else 0
    for target, text in files.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
