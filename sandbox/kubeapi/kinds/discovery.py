"""Discovery documents: /version, /api, /api/v1, /apis, /apis/<group>[/<version>].

Owns the legacy (unaggregated) discovery format, built from the store's registry on each call so
that a new CRD shows at once. Clients that ask for aggregated discovery (kubectl 1.26+) get the
legacy documents with ``Content-Type: application/json`` and fall back to them, as they do with
an older apiserver. Pure: takes resource types, returns dicts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from sandbox.kubeapi.kinds import resources

KUBE_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-kamaji-broker-sandbox",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-12-11T00:00:00Z",
    "goVersion": "go1.23.4",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key giving Kubernetes' version order: GA > beta > alpha, higher numbers first, others last."""
    match = _VERSION_RE.fullmatch(version)
    if match is None:
        return (3, 0, 0, version)
    major, stage, minor = match.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -int(major), -int(minor or 0), version)


def api_versions(address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def _group_versions(types: Iterable[resources.ResourceType]) -> dict[str, list[str]]:
    found: dict[str, set[str]] = {}
    for rtype in types:
        if rtype.group:
            found.setdefault(rtype.group, set()).update(rtype.versions)
    return {group: sorted(versions, key=version_priority) for group, versions in sorted(found.items())}


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(types: Iterable[resources.ResourceType]) -> dict[str, Any]:
    groups = [_group(name, versions) for name, versions in _group_versions(types).items()]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(types: Iterable[resources.ResourceType], group: str) -> dict[str, Any] | None:
    versions = _group_versions(types).get(group)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def _entries(rtype: resources.ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": rtype.plural,
        "singularName": rtype.singular,
        "namespaced": rtype.namespaced,
        "kind": rtype.kind,
        "verbs": list(resources.VERBS),
    }
    if rtype.short_names:
        main["shortNames"] = list(rtype.short_names)
    if rtype.categories:
        main["categories"] = list(rtype.categories)
    out = [main]
    sub_verbs = ["get", "patch", "update"]
    if rtype.has_status:
        out.append(
            {
                "name": f"{rtype.plural}/status",
                "singularName": "",
                "namespaced": rtype.namespaced,
                "kind": rtype.kind,
                "verbs": sub_verbs,
            }
        )
    if rtype.scale is not None:
        out.append(
            {
                "name": f"{rtype.plural}/scale",
                "singularName": "",
                "namespaced": rtype.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": sub_verbs,
            }
        )
    return out


def api_resource_list(
    types: Iterable[resources.ResourceType], group: str, version: str
) -> dict[str, Any] | None:
    served = [t for t in types if t.group == group and version in t.versions]
    if not served:
        return None
    group_version = f"{group}/{version}" if group else version
    entries = [entry for rtype in sorted(served, key=lambda t: t.plural) for entry in _entries(rtype)]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    }
