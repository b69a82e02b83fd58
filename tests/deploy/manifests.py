"""Helpers of tests/deploy: build, render, validate and wire up the deployment artifacts.

``kustomize`` builds a directory with the pinned kubectl (``helpers.kubectl``; tests skip
with that reason when it is absent), ``render_chart`` renders the agent chart with Helm's own
engine (the Go SDK in the helm-python-sdk wheel, offline), ``validate`` checks one document
against the schemas of ``KUBERNETES_VERSION``; ``granted`` and ``materialize`` turn manifests into
what the code compares them with: RBAC rules, and the files a pod would see.
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate  # type: ignore[import-untyped]  # no stubs, no py.typed
import pytest
import yaml

from tests import helpers

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CHART = DEPLOY / "charts" / "kamaji-broker-agent"

KUBERNETES_VERSION = "1.31.0"
"""Schemas every manifest is validated against (strict: unknown fields are errors)."""

Rule = tuple[str, str, str]
"""(apiGroup, resource, verb): one permission."""


def kustomize(directory: Path) -> list[dict[str, Any]]:
    kubectl = helpers.kubectl()
    if not kubectl:
        pytest.skip("kubectl not installed (needed for `kubectl kustomize`)")
    done = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def render_chart(values: Mapping[str, Any], *, namespace: str = "kamaji-broker-system") -> dict[str, str]:
    """Template path → rendered text, as `helm install --dry-run` renders it (schema checked first)."""
    chart = helm_python.Chart.load(CHART)
    chart.validate_schema(dict(values))
    return chart.render(dict(values), name="kamaji-broker-agent", namespace=namespace, is_install=True)


def documents(rendered: Mapping[str, str]) -> list[dict[str, Any]]:
    return [
        d
        for path, text in sorted(rendered.items())
        if path.endswith((".yaml", ".yml"))
        for d in yaml.safe_load_all(text)
        if d
    ]


def validate(doc: Mapping[str, Any]) -> None:
    """Raise kubernetes_validate.ValidationError when ``doc`` does not fit the pinned schemas."""
    kubernetes_validate.validate(dict(doc), KUBERNETES_VERSION, strict=True)


def of_kind(docs: Iterable[Mapping[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    return [d for d in docs if d.get("kind") == kind]


def one(docs: Iterable[Mapping[str, Any]], kind: str) -> Mapping[str, Any]:
    found = of_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def granted(roles: Iterable[Mapping[str, Any]]) -> set[Rule]:
    """Every (apiGroup, resource, verb) the rules of ``roles`` grant."""
    out: set[Rule] = set()
    for role in roles:
        for rule in role.get("rules") or ():
            assert not rule.get("resourceNames"), "rules are compared without resourceNames"
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    out.update((group, resource, verb) for verb in rule["verbs"])
    return out


def declared(rules: Iterable[tuple[str, str, tuple[str, ...]]]) -> set[Rule]:
    return {(group, resource, verb) for group, resource, verbs in rules for verb in verbs}


def materialize(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    *,
    sources: Mapping[tuple[str, str], Mapping[str, str]],
    root: Path,
) -> dict[str, Path]:
    """Write the files ``container`` sees through its Secret and ConfigMap volumes under ``root``.

    ``sources`` maps (kind, name) to the object's data (keys → text). A key the volume's items
    name but the object lacks fails, as the kubelet would. Returns mountPath → local directory.
    """
    volumes = {v["name"]: v for v in pod.get("volumes") or ()}
    mounts: dict[str, Path] = {}
    for mount in container.get("volumeMounts") or ():
        volume = volumes[mount["name"]]
        local = root / mount["mountPath"].lstrip("/")
        local.mkdir(parents=True, exist_ok=True)
        mounts[mount["mountPath"]] = local
        for kind, spec, name_field in (
            ("Secret", volume.get("secret"), "secretName"),
            ("ConfigMap", volume.get("configMap"), "name"),
        ):
            if spec is None:
                continue
            data = sources.get((kind, spec[name_field]))
            assert data is not None, f"{kind} {spec[name_field]} (volume {mount['name']}) is not provided"
            items = spec.get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                assert item["key"] in data, f"{kind} {spec[name_field]} has no key {item['key']}"
                (local / item["path"]).write_text(data[item["key"]])
    return mounts


def local_path(value: str, mounts: Mapping[str, Path]) -> str:
    for mount_path, local in mounts.items():
        if value == mount_path or value.startswith(mount_path.rstrip("/") + "/"):
            return str(local) + value[len(mount_path.rstrip("/")) :]
    return value


def secret_data(secret: Mapping[str, Any]) -> dict[str, str]:
    data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    data.update(secret.get("stringData") or {})
    return data
