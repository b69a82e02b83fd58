"""sandbox.realkube: a real cluster from the pinned binaries, with RBAC and controllers at work."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from common import kube as ckube
from common.kube import errors as kerrors
from common.kube import resources, reviews
from sandbox import realkube
from sandbox.realkube import binaries, tokens
from tests.helpers import eventually

CONFIG_MAP = resources.Resource("", "v1", "configmaps", "ConfigMap")
ROLE = resources.Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDING = resources.Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")


def pinned_version() -> str:
    text = (binaries.GOMOD / "kubernetes" / "go.mod").read_text()
    found = re.search(r"^require k8s\.io/kubernetes (v\S+)$", text, re.MULTILINE)
    assert found is not None
    return found.group(1)


@pytest.fixture
async def namespace(real_kube: ckube.Kube) -> str:
    name = "t-" + uuid.uuid4().hex[:8]
    await real_kube.create(resources.NAMESPACE, {"metadata": {"name": name}})
    return name


async def test_it_serves_the_pinned_version(real_kube: ckube.Kube, real_cluster: realkube.Cluster) -> None:
    assert await reviews.version(real_kube) == pinned_version()
    assert real_cluster.started_in > 0


async def test_a_service_account_may_do_only_what_rbac_grants(
    real_kube: ckube.Kube, real_cluster: realkube.Cluster, namespace: str, tmp_path: Path
) -> None:
    await real_kube.create(resources.SERVICE_ACCOUNT, {"metadata": {"name": "reader"}}, namespace=namespace)
    config = await real_cluster.service_account_kubeconfig(
        namespace=namespace, name="reader", path=tmp_path / "reader.kubeconfig"
    )
    reader = await ckube.connect(in_cluster=False, kubeconfig=config)
    try:
        with pytest.raises(kerrors.KubeError) as refused:
            await reader.list(CONFIG_MAP, namespace=namespace)
        assert refused.value.status == 403
        assert tokens.user(namespace, "reader") in refused.value.message
        assert 'cannot list resource "configmaps"' in refused.value.message
        rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}
        await real_kube.create(ROLE, {"metadata": {"name": "read"}, "rules": [rule]}, namespace=namespace)
        binding = {
            "metadata": {"name": "read"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
        }
        await real_kube.create(ROLE_BINDING, binding, namespace=namespace)
        listing = reviews.Access("list", "", "configmaps", namespace)
        await eventually(lambda: _allowed(reader, listing), within=30, what="the RoleBinding in force")
        assert await reader.list(CONFIG_MAP, namespace=namespace) is not None
        with pytest.raises(kerrors.KubeError) as still:
            await reader.create(CONFIG_MAP, {"metadata": {"name": "x"}}, namespace=namespace)
        assert still.value.status == 403
    finally:
        await reader.close()


async def _allowed(client: ckube.Kube, access: reviews.Access) -> bool:
    return (await reviews.allowed(client, access))[0]


async def test_garbage_collection_is_the_controller_managers_a_moment_later(
    real_kube: ckube.Kube, namespace: str
) -> None:
    owner = await real_kube.create(CONFIG_MAP, {"metadata": {"name": "owner"}}, namespace=namespace)
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    meta = {"name": "dependent", "ownerReferences": [ref]}
    await real_kube.create(CONFIG_MAP, {"metadata": meta}, namespace=namespace)
    await real_kube.delete(CONFIG_MAP, "owner", namespace=namespace)

    async def collected() -> bool:
        return await real_kube.get_or_none(CONFIG_MAP, "dependent", namespace=namespace) is None

    await eventually(collected, within=30, what="the dependent collected")


async def test_a_cluster_stops_every_process(real_binaries: realkube.Binaries, tmp_path: Path) -> None:
    cluster = realkube.Cluster(tmp_path, name="short", binaries=real_binaries)
    await cluster.start()
    children = list(cluster.children.values())
    assert {c.name for c in children} == {
        "etcd-short",
        "kube-apiserver-short",
        "kube-controller-manager-short",
    }
    await cluster.stop()
    assert all(c.returncode is not None for c in children)
