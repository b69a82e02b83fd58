"""The official synchronous ``kubernetes`` client against each backend: a second, independent real client."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes import client as kclient

from tests.sandbox.kubeapi import backends

# The sync client's partial annotations are not what we test: treat its entry points as untyped.
new_client_from_config: Any = kubernetes.config.new_client_from_config
Watch: Any = kubernetes.watch.Watch


def _round_trip(kubeconfig: Path, namespace: str) -> dict[str, Any]:
    api = new_client_from_config(config_file=str(kubeconfig))
    try:
        core = kclient.CoreV1Api(api)
        namespaces = [ns.metadata.name for ns in core.list_namespace().items if ns.metadata]
        core.create_namespaced_secret(
            namespace,
            kclient.V1Secret(metadata=kclient.V1ObjectMeta(name="s", labels={"a": "b"}), data={"k": "dg=="}),
        )
        secrets = core.list_namespaced_secret(namespace, label_selector="a=b")
        secret_names = [s.metadata.name for s in secrets.items if s.metadata]
        custom = kclient.CustomObjectsApi(api)
        made: Any = custom.create_namespaced_custom_object(
            "example.com",
            "v1",
            namespace,
            "widgets",
            {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}},
        )
        watched = []
        watch = Watch()
        for event in watch.stream(core.list_namespaced_secret, namespace, timeout_seconds=1):
            watched.append((event["type"], event["object"].metadata.name))
            watch.stop()
        return {
            "namespaces": namespaces,
            "secrets": secret_names,
            "widget_replicas": made["spec"]["replicas"],
            "watched": watched,
        }
    finally:
        api.close()


async def test_sync_client_lists_creates_and_watches(
    with_widgets: backends.Backend, kubeconfig: Path, namespace: str
) -> None:
    result = await asyncio.to_thread(_round_trip, kubeconfig, namespace)
    assert {"default", "kube-node-lease", "kube-public", "kube-system", namespace} <= set(
        result.pop("namespaces")
    )
    assert result == {
        "secrets": ["s"],
        "widget_replicas": 1,
        "watched": [("ADDED", "s")],
    }
