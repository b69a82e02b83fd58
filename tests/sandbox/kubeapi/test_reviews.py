"""SelfSubjectAccessReviews over HTTP: kubernetes_asyncio (common.kube.reviews) and unmodified
`kubectl auth can-i`, as a token user bound by RBAC objects stored in the emulator, and as the admin."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import yaml

from common import kube as ckube
from common.kube import reviews
from sandbox import kubeapi
from tests.sandbox.kubeapi.test_kubectl import KUBECTL, Kubectl

RBAC = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: agent, namespace: site}
rules:
- apiGroups: [""]
  resources: [secrets]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: agent, namespace: site}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: agent}
subjects:
- {kind: ServiceAccount, name: agent, namespace: site}
"""


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[kubeapi.Server]:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('agent-token,system:serviceaccount:site:agent,u1,"system:serviceaccounts"\n')
    server = kubeapi.Server(name="authz", token_auth_file=tokens)
    await server.start(port=0)
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def admin(server: kubeapi.Server, tmp_path: Path) -> AsyncIterator[ckube.Kube]:
    kube = await ckube.connect(in_cluster=False, kubeconfig=server.write_kubeconfig(tmp_path / "admin"))
    await kube.create(ckube.resources.NAMESPACE, {"metadata": {"name": "site"}})
    for doc in yaml.safe_load_all(RBAC):
        await kube.create(
            ckube.resources.Resource(
                "rbac.authorization.k8s.io", "v1", doc["kind"].lower() + "s", doc["kind"]
            ),
            doc,
            namespace="site",
        )
    yield kube
    await kube.close()


@pytest.fixture
async def agent(server: kubeapi.Server, admin: ckube.Kube, tmp_path: Path) -> AsyncIterator[ckube.Kube]:
    path = server.write_kubeconfig(tmp_path / "agent", token="agent-token")
    kube = await ckube.connect(in_cluster=False, kubeconfig=path)
    yield kube
    await kube.close()


async def test_token_user_is_answered_from_rbac(agent: ckube.Kube) -> None:
    ok, reason = await reviews.allowed(agent, reviews.Access("list", "", "secrets", "site"))
    assert ok and reason == 'RBAC: allowed by RoleBinding "site/agent" of Role "agent"'
    assert await reviews.allowed(agent, reviews.Access("get", "", "secrets", "site")) == (False, "")
    assert await reviews.allowed(agent, reviews.Access("list", "", "secrets", "other")) == (False, "")
    assert await reviews.allowed(agent, reviews.Access("list", "", "secrets")) == (False, "")


async def test_without_a_listed_token_it_is_the_admin(admin: ckube.Kube) -> None:
    ok, reason = await reviews.allowed(admin, reviews.Access("delete", "x.io", "anything", "ns"))
    assert ok and "system:masters" in reason


async def test_review_needs_attributes(server: kubeapi.Server) -> None:
    url = f"{server.url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    async with aiohttp.ClientSession() as s, s.post(url, json={"spec": {}}) as r:
        assert r.status == 400
        assert "spec.resourceAttributes" in (await r.json())["message"]
    async with aiohttp.ClientSession() as s, s.get(f"{server.url}/apis/authorization.k8s.io/v1") as r:
        kinds = {e["kind"] for e in (await r.json())["resources"]}
    assert kinds == {"SelfSubjectAccessReview"}


@pytest.mark.skipif(not KUBECTL.exists(), reason=f"kubectl is absent: {KUBECTL}")
async def test_kubectl_auth_can_i(server: kubeapi.Server, agent: ckube.Kube, tmp_path: Path) -> None:
    """kubectl sends no bearer token over plain HTTP: it asks as the user with --as (impersonation)."""
    kubectl = Kubectl(server.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")
    as_agent = ("--as", "system:serviceaccount:site:agent")
    code, out, _ = await kubectl.run("auth", "can-i", "watch", "secrets", "-n", "site", *as_agent, ok=False)
    assert (code, out.strip()) == (0, "yes")
    code, out, _ = await kubectl.run("auth", "can-i", "delete", "secrets", "-n", "site", *as_agent, ok=False)
    assert (code, out.strip()) == (1, "no")
    code, out, _ = await kubectl.run("auth", "can-i", "delete", "secrets", "-n", "site", ok=False)
    assert (code, out.strip()) == (0, "yes")


async def test_only_the_admin_impersonates(server: kubeapi.Server, agent: ckube.Kube) -> None:
    url = f"{server.url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    body = {"spec": {"resourceAttributes": {"verb": "get", "resource": "secrets", "namespace": "site"}}}
    headers = {"Authorization": "Bearer agent-token", "Impersonate-User": "root"}
    async with aiohttp.ClientSession() as s, s.post(url, json=body, headers=headers) as r:
        assert r.status == 403
