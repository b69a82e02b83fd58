"""Generate the RemoteKamajiControlPlane and Site CRDs from the pydantic models in ``hub.api``
and ``hub.site_api``.

Owns the translation of pydantic's JSON Schema into a Kubernetes *structural* OpenAPI v3 schema
(every node typed, no ``$ref``, no ``anyOf`` for optionality, ``x-kubernetes-preserve-unknown-
fields`` for free-form objects) and the CRD around it: names, CAPI contract labels, printer
columns, the ``status`` and ``scale`` subresources. Talks to nothing but the file it writes.

    python -m hub.crdgen            # (re)write deploy/crds/<group>_<plural>.yaml, both kinds
    python -m hub.crdgen --check    # exit 1 when a committed file differs from the models

``tests/hub/test_crd.py`` runs the comparison too, so the models and the CRD cannot drift.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from hub import api, site_api

Schema = dict[str, Any]

FILENAME: Final = f"{api.GROUP}_{api.PLURAL}.yaml"
SITE_FILENAME: Final = f"{site_api.GROUP}_{site_api.PLURAL}.yaml"
"""The Site CRD's file, next to the RKCP's (``--output``'s directory)."""
DEFAULT_OUTPUT: Final = Path("deploy") / "crds" / FILENAME


def _header(kind: str, source: str) -> str:
    return (
        f"# {kind} CRD. Generated from {source} by `python -m hub.crdgen`: do not edit\n"
        "# by hand (tests/hub/test_crd.py fails when this file and the models differ).\n"
    )


HEADER: Final = _header(api.KIND, "hub/api.py")
SITE_HEADER: Final = _header(site_api.KIND, "hub/site_api.py")

# Keywords a structural schema node may carry after translation; anything else pydantic emits
# (const, $ref, anyOf for unions, ...) means a model uses a shape Kubernetes cannot express, and
# generation fails rather than writing a schema the API server would refuse.
ALLOWED: Final = frozenset(
    {
        "type",
        "format",
        "description",
        "default",
        "enum",
        "pattern",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "properties",
        "required",
        "items",
        "additionalProperties",
        "nullable",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type",
        "x-kubernetes-int-or-string",
    }
)


class SchemaError(ValueError):
    """A model cannot be written as a structural schema; the message names the JSON path."""


def _resolve(node: Schema, defs: Mapping[str, Schema]) -> Schema:
    # A $ref with siblings (a field's description or default next to a model's $ref): the
    # field's keys win over the referenced model's, as pydantic intends.
    node = dict(node)
    if "allOf" in node and len(node["allOf"]) == 1:
        node = {**node.pop("allOf")[0], **node}
    ref = node.pop("$ref", None)
    if ref is not None:
        name = str(ref).rsplit("/", 1)[-1]
        node = {**_resolve(defs[name], defs), **node}
    return node


def _drop_null(node: Schema, path: str) -> Schema:
    # ``X | None = None`` becomes anyOf [X, null] with default null. In a CRD an absent field is
    # the "None", and the wire form never carries nulls (Model.to_dict drops them), so the field
    # is simply X, not nullable.
    options = node.get("anyOf")
    if options is None:
        return node
    rest = [o for o in options if o != {"type": "null"}]
    if len(rest) != 1:
        raise SchemaError(f"{path}: unions are not structural (anyOf {options!r})")
    merged = {**rest[0], **{k: v for k, v in node.items() if k != "anyOf"}}
    if merged.get("default", ...) is None:
        del merged["default"]
    return merged


def _description(text: str) -> str:
    # Docstrings wrap at the code's line length; `kubectl explain` wraps by itself, so keep only
    # paragraph breaks. reStructuredText literals (``x``) read better as Markdown there.
    paragraphs = (" ".join(p.split()) for p in text.split("\n\n"))
    return "\n\n".join(p for p in paragraphs if p).replace("``", "`")


def _convert(node: Schema, defs: Mapping[str, Schema], path: str) -> Schema:
    node = _drop_null(_resolve(node, defs), path)
    node = _resolve(node, defs)  # again: the branch anyOf left behind may itself be a $ref
    node.pop("title", None)
    if "description" in node:
        node["description"] = _description(str(node["description"]))
    additional = node.get("additionalProperties")
    if additional is True or (additional == {} and node.get("type") == "object"):
        # Free-form object (dict[str, Any], or a model with extra="allow"): keep what the user
        # wrote instead of pruning it; additionalProperties must not sit next to properties.
        del node["additionalProperties"]
        node["x-kubernetes-preserve-unknown-fields"] = True
    elif additional is False:
        del node["additionalProperties"]
    elif isinstance(additional, dict):
        node["additionalProperties"] = _convert(additional, defs, f"{path}[*]")
    if "properties" in node:
        node["properties"] = {
            key: _convert(sub, defs, f"{path}.{key}") for key, sub in node["properties"].items()
        }
    if isinstance(node.get("items"), dict):
        node["items"] = _convert(node["items"], defs, f"{path}[]")
    unexpected = set(node) - ALLOWED
    if unexpected:
        raise SchemaError(f"{path}: keywords a structural schema cannot carry: {sorted(unexpected)}")
    if "type" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        raise SchemaError(f"{path}: every node of a structural schema needs a type")
    if "properties" in node and "additionalProperties" in node:
        raise SchemaError(f"{path}: properties and additionalProperties are mutually exclusive")
    return node


def structural(json_schema: Schema, *, path: str = "") -> Schema:
    """A pydantic ``model_json_schema()`` as a structural schema (raises SchemaError if impossible)."""
    schema = copy.deepcopy(json_schema)
    defs: Mapping[str, Schema] = schema.pop("$defs", {})
    return _convert(schema, defs, path or ".")


def open_api_schema() -> Schema:
    """The ``openAPIV3Schema`` of the RemoteKamajiControlPlane version."""
    described = "" if api.RemoteKamajiControlPlane.__doc__ is None else api.RemoteKamajiControlPlane.__doc__
    return {
        "description": described.strip(),
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion of this object."},
            "kind": {"type": "string", "description": "Kind of this object."},
            "metadata": {"type": "object"},
            "spec": structural(api.Spec.model_json_schema(mode="validation"), path="spec"),
            "status": structural(api.Status.model_json_schema(mode="validation"), path="status"),
        },
    }


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition, as a dict."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{api.PLURAL}.{api.GROUP}",
            # The CAPI contract: Cluster API resolves which of our versions implements each of
            # its contract versions from these labels.
            "labels": {
                "cluster.x-k8s.io/v1beta1": api.VERSION,
                "cluster.x-k8s.io/v1beta2": api.VERSION,
            },
        },
        "spec": {
            "group": api.GROUP,
            "names": {
                "kind": api.KIND,
                "listKind": api.LIST_KIND,
                "plural": api.PLURAL,
                "singular": api.SINGULAR,
                "shortNames": list(api.SHORT_NAMES),
                "categories": list(api.CATEGORIES),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": api.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                    "additionalPrinterColumns": _printer_columns(),
                    "schema": {"openAPIV3Schema": open_api_schema()},
                }
            ],
        },
    }


def _column(name: str, type_: str, path: str, description: str) -> dict[str, str]:
    return {"name": name, "type": type_, "jsonPath": path, "description": description}


def _printer_columns() -> list[dict[str, str]]:
    column = _column
    return [
        column("Site", "string", ".spec.site", "Site running the TenantControlPlane"),
        column("Version", "string", ".spec.version", "Kubernetes version"),
        column("Ready", "boolean", ".status.ready", "The control plane serves"),
        column("Endpoint", "string", ".spec.controlPlaneEndpoint.host", "API server host"),
        column("Age", "date", ".metadata.creationTimestamp", "Time since creation"),
    ]


def site_open_api_schema() -> Schema:
    """The ``openAPIV3Schema`` of the Site version (spec optional: ``{}`` means the defaults)."""
    described = "" if site_api.Site.__doc__ is None else site_api.Site.__doc__
    spec = structural(site_api.SiteSpec.model_json_schema(mode="validation"), path="spec")
    spec["default"] = {}
    return {
        "description": described.strip(),
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion of this object."},
            "kind": {"type": "string", "description": "Kind of this object."},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": structural(site_api.SiteStatus.model_json_schema(mode="validation"), path="status"),
        },
    }


def site_crd() -> dict[str, Any]:
    """The Site CustomResourceDefinition (cluster-scoped, status subresource), as a dict."""
    column = _column
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{site_api.PLURAL}.{site_api.GROUP}"},
        "spec": {
            "group": site_api.GROUP,
            "names": {
                "kind": site_api.KIND,
                "listKind": site_api.LIST_KIND,
                "plural": site_api.PLURAL,
                "singular": site_api.SINGULAR,
                "categories": list(site_api.CATEGORIES),
            },
            "scope": "Cluster",
            "versions": [
                {
                    "name": site_api.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        column("Connected", "boolean", ".status.connected", "The agent's heartbeat is fresh"),
                        column(
                            "Heartbeat", "date", ".status.lastHeartbeatTime", "Time since the last heartbeat"
                        ),
                        column(
                            "Backlog", "integer", ".status.backlog", "Intents the agent has not processed"
                        ),
                        column("Control Planes", "integer", ".status.controlPlanes", "RKCPs placed here"),
                        column("Agent Version", "string", ".status.agentVersion", "Version of the agent"),
                        column("Age", "date", ".metadata.creationTimestamp", "Time since creation"),
                    ],
                    "schema": {"openAPIV3Schema": site_open_api_schema()},
                }
            ],
        },
    }


def render() -> str:
    """The RKCP CRD file's text (header comment plus YAML, keys sorted so the output is stable)."""
    return HEADER + yaml.safe_dump(crd(), sort_keys=True, width=100)


def render_site() -> str:
    """The Site CRD file's text."""
    return SITE_HEADER + yaml.safe_dump(site_crd(), sort_keys=True, width=100)


def main(argv: Sequence[str] | None = None) -> int:
    summary = "Generate the RemoteKamajiControlPlane and Site CRDs from the pydantic models in hub."
    parser = argparse.ArgumentParser(prog="python -m hub.crdgen", description=summary)
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help=f"the RKCP CRD file (%(default)s); the Site CRD goes next to it as {SITE_FILENAME}",
    )
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when one differs")
    args = parser.parse_args(argv)
    output: Path = args.output
    files = {output: render(), output.parent / SITE_FILENAME: render_site()}
    if args.check:
        stale = [t for t, text in files.items() if (t.read_text() if t.is_file() else "") != text]
        for target in stale:
            print(f"{target} is out of date: run python -m hub.crdgen", file=sys.stderr)
        return 1 if stale else 0
    for target, text in files.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
