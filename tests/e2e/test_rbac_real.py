"""On real clusters, installed as users install them, the hub and agents run as their
ServiceAccounts and need exactly the RBAC we ship: kube-apiserver's audit log shows every request
they made; none was refused, and every verb we ship was used (or the table below says where it
is, and why this scenario cannot reach it). ``kubectl auth can-i --list`` shows those rules.
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from agent import rbac as agent_rbac
from common.kube import resources
from hub import rbac as hub_rbac
from sandbox.launcher import System, installs, workload
from sandbox.realkube import audit, tokens
from tests import helpers, systems
from tests.e2e.test_doctor import doctor

SITE = "site-a"
HUB = tokens.user(installs.SYSTEM_NAMESPACE, "kamaji-broker-hub")
AGENT = tokens.user(installs.SYSTEM_NAMESPACE, installs.AGENT_RELEASE)
CLUSTER_ROLE = resources.Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
DOCKER_CLUSTER = resources.Resource(
    "infrastructure.cluster.x-k8s.io", "v1beta1", "dockerclusters", "DockerCluster"
)

BASELINE = {
    "selfsubjectreviews.authentication.k8s.io",
    "selfsubjectaccessreviews.authorization.k8s.io",
    "selfsubjectrulesreviews.authorization.k8s.io",
}
"""What every authenticated user may do (system:basic-user): not ours."""


NOT_REACHED = {
    (AGENT, audit.Use("", "events", "create")): "the Warning Event of an orphan TCP, after its grace "
    "period (tests/agent/cleanup, tests/faults/test_site_deletions)",
    (HUB, audit.Use("coordination.k8s.io", "leases", "list")): "the replicas' Leases with --shard "
    "(tests/faults/test_hub_shards, on the real backend too); here the replicas elect a leader",
    (HUB, audit.Use("coordination.k8s.io", "leases", "delete")): "a replica's own Lease at a clean "
    "stop with --shard (tests/faults/test_hub_shards)",
}
"""Shipped verbs this scenario does not use, and where they are used instead."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(real_binaries: Any, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[System]:
    directory = tmp_path_factory.mktemp("rbac") / "sandbox"
    base = [("c1", SITE), ("c2", SITE)]
    async with systems.running(directory, sites=(SITE,), base=base, kubernetes="real", hub_replicas=2) as w:
        await _lifecycle(w)
        yield w


async def _lifecycle(w: System) -> None:
    """Everything the hub and an agent do in a control plane's life, on the real clusters."""
    await systems.update_control_plane(w, "c1", version="v1.32.0", replicas=3)
    await _with_infrastructure(w, "c3")
    await _rotated_kubeconfig(w, "c1")
    await systems.delete_control_plane(w, "c2")

    async def settled() -> bool:
        gone = await w.mgmt.get_or_none(systems.RKCP, "c2", namespace="default") is None
        return gone and (await w.progress()).done

    await helpers.eventually(settled, within=90, every=0.2, what="c2 deleted, the others Ready")


async def _with_infrastructure(w: System, name: str) -> None:
    """A Cluster with an InfraCluster: the hub writes the site's endpoint into it."""
    infra = {"apiVersion": DOCKER_CLUSTER.api_version, "kind": "DockerCluster", "metadata": {"name": name}}
    await w.mgmt.create(DOCKER_CLUSTER, infra, namespace="default")
    body = workload.cluster(name, namespace="default")
    body["spec"]["infrastructureRef"] = {
        "apiVersion": DOCKER_CLUSTER.api_version,
        "kind": "DockerCluster",
        "name": name,
    }
    cluster = await w.mgmt.create(resources.CLUSTER, body, namespace="default")
    rkcp = workload.remote_kamaji_control_plane(
        name,
        namespace="default",
        cluster_uid=cluster["metadata"]["uid"],
        site=SITE,
        target_namespace=w.namespace,
    )
    await w.mgmt.create(systems.RKCP, rkcp, namespace="default")

    async def endpoint() -> Any:
        found = await w.mgmt.get(DOCKER_CLUSTER, name, namespace="default")
        return (found.get("spec") or {}).get("controlPlaneEndpoint", {}).get("host")

    await helpers.eventually(endpoint, within=60, what="the InfraCluster's endpoint")


async def _rotated_kubeconfig(w: System, name: str) -> None:
    """Kamaji writes a new admin kubeconfig at the site: the hub replaces ``<cluster>-kubeconfig``."""
    site = w.site_kube(SITE)
    tcp = f"{name}-admin-kubeconfig"
    secret = await site.get(resources.SECRET, tcp, namespace=w.namespace)
    key = "admin.conf" if "admin.conf" in secret["data"] else next(iter(secret["data"]))
    rotated = base64.b64decode(secret["data"][key]) + b"\n# rotated\n"
    secret["data"][key] = base64.b64encode(rotated).decode()
    await site.replace(resources.SECRET, tcp, secret, namespace=w.namespace)

    async def replaced() -> bool:
        found = await w.mgmt.get(resources.SECRET, f"{name}-kubeconfig", namespace="default")
        return base64.b64decode(found["data"]["value"]).endswith(b"# rotated\n")

    await helpers.eventually(replaced, within=60, what="the rotated kubeconfig in the management cluster")


def _audit(w: System, cluster: str) -> list[str]:
    return w.real_clusters[cluster].audit_log.read_text().splitlines()


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(
    ("cluster", "user", "rules"),
    [("mgmt", HUB, hub_rbac.RULES), (SITE, AGENT, agent_rbac.RULES + agent_rbac.IDENTITY_RULES)],
    ids=["hub", "agent"],
)
async def test_every_request_was_allowed_and_every_shipped_verb_used(
    world: System, cluster: str, user: str, rules: Any
) -> None:
    lines = _audit(world, cluster)
    assert audit.refused(lines, user) == set(), "a verb missing from what we ship"
    used = {u for u in audit.used(lines, user) if f"{u.resource}.{u.group}" not in BASELINE}
    shipped = audit.expand(rules)
    wildcard = {u for u in shipped if u.resource == "*"}
    unshipped = {u for u in used if u not in shipped and audit.Use(u.group, "*", u.verb) not in wildcard}
    assert unshipped == set()
    reached = used | {
        audit.Use(u.group, "*", u.verb) for u in used if audit.Use(u.group, "*", u.verb) in wildcard
    }
    unused = {u for u in shipped - reached if (user, u) not in NOT_REACHED}
    assert unused == set(), "shipped and never used: remove it, or say where it is used"
    assert {u for who, u in NOT_REACHED if who == user} & reached == set(), "NOT_REACHED is out of date"


def can_i_list(w: System, cluster: str, user: str, namespace: str) -> set[audit.Use]:
    """``kubectl auth can-i --list --as=<user> -n <namespace>``'s resource rows, as ``Use``s."""
    kubectl = str(w.real_clusters[cluster].binaries.kubectl)
    args = [kubectl, "--kubeconfig", str(w.kubeconfig(cluster)), "auth", "can-i", "--list", f"--as={user}"]
    listed = subprocess.run([*args, "-n", namespace], check=True, capture_output=True, text=True).stdout
    found: set[audit.Use] = set()
    for row in listed.splitlines()[1:]:
        if row.startswith(" ") or row.split()[0] in BASELINE:
            continue  # a non-resource URL, or the baseline
        name, verbs = row.split()[0], row[row.rindex("[") + 1 : row.rindex("]")].split()
        qualified, _, subresource = name.partition("/")
        resource, _, group = qualified.partition(".")
        resource += f"/{subresource}" if subresource else ""
        found |= {audit.Use(group, resource, verb) for verb in verbs}
    return found


@pytest.mark.parametrize(
    ("cluster", "user", "namespace", "rules"),
    [
        ("mgmt", HUB, "default", hub_rbac.NAMESPACED + hub_rbac.CLUSTER),
        ("mgmt", HUB, installs.SYSTEM_NAMESPACE, hub_rbac.RULES),
        (SITE, AGENT, "tenants", agent_rbac.RULES),
        (SITE, AGENT, installs.SYSTEM_NAMESPACE, agent_rbac.IDENTITY_RULES),
    ],
    ids=["hub", "hub-own-namespace", "agent-targets", "agent-own-namespace"],
)
def test_kubectl_auth_can_i_lists_exactly_the_rules_we_ship(
    world: System, cluster: str, user: str, namespace: str, rules: Any
) -> None:
    assert can_i_list(world, cluster, user, namespace) == audit.expand(rules)


@pytest.mark.asyncio(loop_scope="module")
async def test_doctor_names_the_verb_a_cluster_role_lacks(world: System) -> None:
    """doctor's RBAC check is the real authorizer's answer: a rule taken out of the ClusterRole
    the install made is named, with the fix; put back, doctor passes again."""
    role = await world.mgmt.get(CLUSTER_ROLE, "kamaji-broker-hub")
    rules = role["rules"]
    role["rules"] = [r for r in rules if r["resources"] != ["events"]]
    await world.mgmt.replace(CLUSTER_ROLE, "kamaji-broker-hub", role)
    try:
        run = await helpers.eventually(
            lambda: doctor(world, "hub"), lambda r: r.code == 1, within=60, every=1, what="doctor FAIL"
        )
        assert run.failed() == ["rbac"], run.out
        line = run.line("FAIL", "rbac")
        assert "1 of " in line and "(create, core, events, cluster-wide)" in line, line
    finally:
        current = await world.mgmt.get(CLUSTER_ROLE, "kamaji-broker-hub")
        await world.mgmt.replace(CLUSTER_ROLE, "kamaji-broker-hub", {**current, "rules": rules})
    run = await helpers.eventually(lambda: doctor(world, "hub"), lambda r: r.code == 0, within=60, every=1)
    assert run.failed() == [], run.out
