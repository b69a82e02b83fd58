"""SelfSubjectAccessReviews over HTTP: kubernetes_asyncio (common.kube.reviews) and unmodified
`kubectl auth can-i`, as a ServiceAccount bound by RBAC objects, and as the admin."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from common import kube as ckube
from common.kube import reviews
from tests.sandbox.kubeapi import backends
from tests.sandbox.kubeapi.test_kubectl import KUBECTL, Kubectl

RBAC = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: agent}
rules:
- apiGroups: [""]
  resources: [secrets]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: agent}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: agent}
subjects:
- {kind: ServiceAccount, name: agent}
"""


@pytest.fixture
async def admin(backend: backends.Backend) -> AsyncIterator[ckube.Kube]:
    kube = await ckube.connect(in_cluster=False, kubeconfig=backend.admin_kubeconfig)
    yield kube
    await kube.close()


@pytest.fixture
async def site(backend: backends.Backend, admin: ckube.Kube) -> str:
    """A namespace with ServiceAccount ``agent``, allowed to list and watch its Secrets."""
    site = await backend.new_namespace("site")
    await admin.create(ckube.resources.SERVICE_ACCOUNT, {"metadata": {"name": "agent"}}, namespace=site)
    for doc in yaml.safe_load_all(RBAC):
        kind = doc["kind"]
        resource = ckube.resources.Resource("rbac.authorization.k8s.io", "v1", kind.lower() + "s", kind)
        await admin.create(resource, doc, namespace=site)
    return site


@pytest.fixture
async def agent_kubeconfig(backend: backends.Backend, site: str, tmp_path: Path) -> Path:
    return await backend.service_account_kubeconfig(namespace=site, name="agent", path=tmp_path / "agent")


@pytest.fixture
async def agent(agent_kubeconfig: Path) -> AsyncIterator[ckube.Kube]:
    kube = await ckube.connect(in_cluster=False, kubeconfig=agent_kubeconfig)
    yield kube
    await kube.close()


async def test_a_service_account_is_answered_from_rbac(agent: ckube.Kube, site: str) -> None:
    ok, reason = await reviews.allowed(agent, reviews.Access("list", "", "secrets", site))
    assert ok
    assert reason == (
        f'RBAC: allowed by RoleBinding "agent/{site}" of Role "agent" to ServiceAccount "agent/{site}"'
    )
    assert await reviews.allowed(agent, reviews.Access("get", "", "secrets", site)) == (False, "")
    assert await reviews.allowed(agent, reviews.Access("list", "", "secrets", f"{site}-other")) == (False, "")
    assert await reviews.allowed(agent, reviews.Access("list", "", "secrets")) == (False, "")


async def test_the_admin_may_do_anything(admin: ckube.Kube) -> None:
    assert await reviews.allowed(admin, reviews.Access("delete", "x.io", "anything", "ns")) == (True, "")


async def test_review_needs_attributes(backend: backends.Backend) -> None:
    url = f"{backend.url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    async with backend.http() as s, s.post(url, json={"spec": {}}) as r:
        assert r.status == 422
        assert (await r.json())["message"] == (
            '.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: null: '
            "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        )
    async with backend.http() as s, s.get(f"{backend.url}/apis/authorization.k8s.io/v1") as r:
        kinds = {e["kind"] for e in (await r.json())["resources"]}
    assert "SelfSubjectAccessReview" in kinds


@pytest.mark.skipif(not KUBECTL.exists(), reason=f"kubectl is absent: {KUBECTL}")
async def test_kubectl_auth_can_i(backend: backends.Backend, site: str, tmp_path: Path) -> None:
    """As the admin, and as the ServiceAccount by impersonation (--as)."""
    kubectl = Kubectl(backend.kubeconfig(tmp_path / "kubeconfig", namespace=site), tmp_path / "cache")
    as_agent = ("--as", f"system:serviceaccount:{site}:agent")
    code, out, _ = await kubectl.run("auth", "can-i", "watch", "secrets", *as_agent, ok=False)
    assert (code, out.strip()) == (0, "yes")
    code, out, _ = await kubectl.run("auth", "can-i", "delete", "secrets", *as_agent, ok=False)
    assert (code, out.strip()) == (1, "no")
    code, out, _ = await kubectl.run("auth", "can-i", "delete", "secrets", ok=False)
    assert (code, out.strip()) == (0, "yes")


async def test_only_the_admin_impersonates(
    backend: backends.Backend, site: str, agent_kubeconfig: Path
) -> None:
    config = yaml.safe_load(await asyncio.to_thread(agent_kubeconfig.read_text))
    token = config["users"][0]["user"]["token"]
    url = f"{backend.url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    body = {"spec": {"resourceAttributes": {"verb": "get", "resource": "secrets", "namespace": site}}}
    headers = {"Authorization": f"Bearer {token}", "Impersonate-User": "root"}
    async with backend.http(admin=False) as s, s.post(url, json=body, headers=headers) as r:
        assert r.status == 403
