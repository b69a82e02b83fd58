"""Tenants as users of the management cluster (tests/security/test_tenants.py): kubectl as one,
what RBAC keeps each out of, and what the RKCP's CRD refuses them.

On real clusters a tenant is a ServiceAccount whose Role (``tests.hub.clusters.TENANT_RULES``)
is in its own namespace only: ``assert_confined`` has the attacker try the victim's objects
directly, and asserts that the API server refuses every attempt with 403, so that the only way
left to the attacker is the broker's, which the cases attack. ``move`` changes an RKCP's
placement, which the CRD's CEL rules refuse where they are evaluated.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import pytest
import yaml

from common.kube import errors as kerrors
from common.kube import resources
from tests import helpers
from tests.hub.conftest import RKCP, World
from tests.security import tenants_support as t


async def _status(attempt: Awaitable[Any]) -> int:
    """The HTTP status ``attempt`` got (200 when it went through)."""
    try:
        await attempt
    except kerrors.KubeError as exc:
        return exc.status
    return 200


async def assert_confined(w: World, namespace: str) -> None:
    """The tenant of ``namespace`` can neither read nor change anything of another tenant's
    (the victim's; the attacker's when ``namespace`` is the victim's): every attempt is 403.

    Only a real API server authorizes: the emulator lets every request through
    (``sandbox.kubeapi.DEVIATIONS``), so there the attempts, writes among them, are not made.
    """
    if not w.clusters.rbac:
        return
    other = t.VICTIM_NS if namespace != t.VICTIM_NS else "evil"
    tenant = await w.tenant(namespace)
    secret = {"metadata": {"name": f"{t.VICTIM}-kubeconfig", "namespace": other}, "data": {}}
    intruder = t.rkcp_obj("intruder", namespace=other, cluster={"metadata": {"name": "x", "uid": "x"}})
    attempts = {
        "read the kubeconfig Secret": tenant.get(resources.SECRET, f"{t.VICTIM}-kubeconfig", namespace=other),
        "list Secrets": tenant.list(resources.SECRET, namespace=other),
        "replace the kubeconfig Secret": tenant.replace(
            resources.SECRET, f"{t.VICTIM}-kubeconfig", secret, namespace=other
        ),
        "create an RKCP": tenant.create(RKCP, intruder, namespace=other),
        "move the RKCP": tenant.patch(RKCP, t.VICTIM, {"spec": {"site": "site-b"}}, namespace=other),
        "pause the Cluster": tenant.patch(
            resources.CLUSTER, t.VICTIM, {"spec": {"paused": True}}, namespace=other
        ),
        "delete the RKCP": tenant.delete(RKCP, t.VICTIM, namespace=other),
    }
    got = {what: await _status(attempt) for what, attempt in attempts.items()}
    assert got == dict.fromkeys(attempts, 403), f"the tenant of {namespace} reached into {other}"


async def move(w: World, name: str, spec: dict[str, Any], *, namespace: str = "evil") -> None:
    """The tenant of ``namespace`` changes the placement (``spec``) of its RKCP ``name``.

    Where the CRD's CEL rules are evaluated (a real API server) they refuse that (422: site,
    targetNamespace and tenantControlPlaneName are immutable), which is asserted; the move is
    then made on the CRD without its immutability rules, so the hub's own check is tested
    wherever they do not hold (the emulator; a CRD from before those rules).
    """
    tenant = await w.tenant(namespace)
    patch = {"spec": spec}
    if not w.clusters.cel:
        await tenant.patch(RKCP, name, patch, namespace=namespace)
        return
    with pytest.raises(kerrors.Invalid, match=r"immutable|after creation"):
        await tenant.patch(RKCP, name, patch, namespace=namespace)

    async def attempt() -> int:
        return await _status(tenant.patch(RKCP, name, patch, namespace=namespace))

    async with _without_transition_rules(w):
        # The API server takes a moment to serve the changed CRD.
        await helpers.eventually(
            attempt, lambda status: status == 200, what=f"{namespace}/{name} moved without the rules"
        )


@contextlib.asynccontextmanager
async def _without_transition_rules(w: World) -> AsyncIterator[None]:
    """The RKCP's CRD without its CEL rules that compare with ``oldSelf``, put back on exit."""
    crd_name = f"{RKCP.plural}.{RKCP.group}"
    crds = resources.CUSTOM_RESOURCE_DEFINITION
    original = await w.mgmt.get(crds, crd_name)
    relaxed = copy.deepcopy(original)
    _drop_transition_rules(relaxed["spec"])
    await w.mgmt.replace(crds, crd_name, relaxed)
    try:
        yield
    finally:
        current = await w.mgmt.get(crds, crd_name)
        restored = {**original, "metadata": current["metadata"]}
        await w.mgmt.replace(crds, crd_name, restored)


def _drop_transition_rules(node: Any) -> None:
    if isinstance(node, dict):
        rules = node.get("x-kubernetes-validations")
        if rules is not None:
            node["x-kubernetes-validations"] = [r for r in rules if "oldSelf" not in r["rule"]]
        for value in node.values():
            _drop_transition_rules(value)
    elif isinstance(node, list):
        for value in node:
            _drop_transition_rules(value)


class Kubectl:
    """kubectl against the management cluster with a tenant's kubeconfig, as the tenant types it."""

    def __init__(self, kubeconfig: Path, cache: Path) -> None:
        kubectl = helpers.kubectl()
        if not kubectl:
            pytest.skip("kubectl not installed (make kube-binaries builds the pinned one)")
        self.base = [kubectl, "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache)]

    async def run(self, *args: str, stdin: str | None = None) -> str:
        proc = await asyncio.create_subprocess_exec(
            *self.base, *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), timeout=60)
        assert proc.returncode == 0, f"kubectl {' '.join(args)} failed: {err.decode()}"
        return out.decode()

    async def create_pair(self, name: str, *, namespace: str, **spec: Any) -> None:
        """``kubectl apply`` the Cluster, then the RKCP owned by it (the namespace is the
        operator's: a tenant may not create one)."""
        await self.run("apply", "-f", "-", stdin=yaml.safe_dump(t.cluster_obj(name, namespace=namespace)))
        uid = await self.run("get", "cluster", name, "-n", namespace, "-o", "jsonpath={.metadata.uid}")
        cluster = {"metadata": {"name": name, "uid": uid}}
        await self.run(
            "apply",
            "-f",
            "-",
            stdin=yaml.safe_dump(t.rkcp_obj(name, namespace=namespace, cluster=cluster, **spec)),
        )

    async def ready_condition(self, name: str, *, namespace: str) -> tuple[str, str, str]:
        path = '{range .status.conditions[?(@.type=="Ready")]}{.status}|{.reason}|{.message}{end}'
        out = await self.run("get", "rkcp", name, "-n", namespace, "-o", f"jsonpath={path}")
        status, reason, message = [*out.split("|", 2), "", "", ""][:3]
        return status, reason, message
