"""Build a kustomization directory as ``kubectl kustomize`` does, for the fields ``deploy/`` uses.

So that ``make release-manifests`` needs neither kustomize nor kubectl. Supported: ``resources``
(files, and directories holding a kustomization of their own), ``namespace``, ``labels`` (pairs,
on metadata only) and ``images``; any other field fails naming it and the file, rather than
being silently ignored. Reads files; talks to nothing else. ``tests/deploy/test_release.py``
checks the build of ``deploy/hub`` equals kubectl's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

SUPPORTED = frozenset({"apiVersion", "kind", "resources", "namespace", "labels", "images"})
CLUSTER_SCOPED = frozenset(
    {
        "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "PriorityClass",
        "StorageClass", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "APIService",
    }
)  # fmt: skip
"""Kinds without a namespace: ``namespace:`` leaves them alone (kustomize knows them by schema)."""
ORDER = (
    "Namespace", "ResourceQuota", "StorageClass", "CustomResourceDefinition", "ServiceAccount",
    "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "ConfigMap", "Secret", "Endpoints",
    "Service", "LimitRange", "PriorityClass", "PersistentVolume", "PersistentVolumeClaim",
    "Deployment", "StatefulSet", "CronJob", "PodDisruptionBudget",
)  # fmt: skip
"""kustomize's legacy order: what others depend on first (the same order kubectl applies in)."""
LAST = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


class KustomizeError(ValueError):
    """A kustomization this builder cannot build the way kustomize would; names the file and field."""


def build(directory: Path) -> list[dict[str, Any]]:
    """The documents of the kustomization in ``directory``, transformed and in kustomize's order."""
    docs = _build(directory)
    return sorted(docs, key=_rank)


def _rank(doc: Mapping[str, Any]) -> tuple[int, str, str, str]:
    """kustomize's legacy sort: by kind (``ORDER``, then the rest, then ``LAST``), then within a
    kind by namespace and name."""
    kind = doc.get("kind", "")
    if kind in ORDER:
        rank = ORDER.index(kind)
    else:
        rank = len(ORDER) + 1 + LAST.index(kind) if kind in LAST else len(ORDER)
    meta = doc.get("metadata") or {}
    return rank, kind, meta.get("namespace") or "", meta.get("name") or ""


def _build(directory: Path) -> list[dict[str, Any]]:
    path = directory / "kustomization.yaml"
    k = yaml.safe_load(path.read_text()) or {}
    unknown = sorted(set(k) - SUPPORTED)
    if unknown:
        raise KustomizeError(f"{path}: fields {unknown} are not supported by this builder")
    docs: list[dict[str, Any]] = []
    for entry in k.get("resources") or ():
        resource = directory / entry
        if resource.is_dir():
            docs += _build(resource)
        else:
            docs += [d for d in yaml.safe_load_all(resource.read_text()) if d]
    if k.get("namespace"):
        accounts = {
            ((d.get("metadata") or {}).get("namespace") or "", (d.get("metadata") or {}).get("name"))
            for d in docs
            if d.get("kind") == "ServiceAccount"
        }
        for doc in docs:
            _set_namespace(doc, k["namespace"], accounts)
    for entry in k.get("labels") or ():
        _add_labels(docs, entry, path)
    for image in k.get("images") or ():
        for doc in docs:
            for container in _containers(doc):
                _set_image(container, image)
    return docs


def _set_namespace(doc: dict[str, Any], namespace: str, accounts: set[tuple[str, Any]]) -> None:
    if doc.get("kind") not in CLUSTER_SCOPED:
        doc.setdefault("metadata", {})["namespace"] = namespace
    if doc.get("kind") in ("RoleBinding", "ClusterRoleBinding"):
        # kustomize moves a binding's ServiceAccount along with the ServiceAccount when the
        # kustomization holds it (and any "default" account); another namespace's stays there.
        for subject in doc.get("subjects") or ():
            held = (subject.get("namespace") or "", subject.get("name")) in accounts
            if subject.get("kind") == "ServiceAccount" and (held or subject.get("name") == "default"):
                subject["namespace"] = namespace


def _add_labels(docs: list[dict[str, Any]], entry: Mapping[str, Any], path: Path) -> None:
    if entry.get("includeSelectors") or entry.get("includeTemplates") or entry.get("fields"):
        raise KustomizeError(f"{path}: labels with includeSelectors, includeTemplates or fields")
    for doc in docs:
        labels = doc.setdefault("metadata", {}).get("labels") or {}
        doc["metadata"]["labels"] = {**labels, **entry.get("pairs", {})}


def _containers(node: Any) -> Iterator[dict[str, Any]]:
    """Every container and init container anywhere in ``node`` (a pod template, a CronJob's...)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                yield from (c for c in value if isinstance(c, dict))
            else:
                yield from _containers(value)
    elif isinstance(node, list):
        for item in node:
            yield from _containers(item)


def _set_image(container: dict[str, Any], image: Mapping[str, str]) -> None:
    reference = container.get("image", "")
    name, tag = _split(reference)
    if name != image["name"]:
        return
    name = image.get("newName", name)
    if "digest" in image:
        container["image"] = f"{name}@{image['digest']}"
    else:
        tag = image.get("newTag", tag)
        container["image"] = f"{name}:{tag}" if tag else name


def _split(reference: str) -> tuple[str, str]:
    """``repo/name:tag`` → (``repo/name``, ``tag``); a registry's port is not a tag."""
    name = reference.partition("@")[0]
    head, colon, tag = name.rpartition(":")
    if colon and "/" not in tag:
        return head, tag
    return name, ""
