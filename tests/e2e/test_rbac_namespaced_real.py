"""The hub installed the namespaced way (deploy/hub/namespaced: its ClusterRole bound by a
RoleBinding in each watched namespace, nothing namespaced cluster-wide) and run with
``--namespaces`` as its ServiceAccount on a real kube-apiserver: a control plane in the watched
namespace becomes Ready, the audit log shows no request refused and none made outside the
watched and the hub's own namespaces, and the authorizer refuses the hub every Secret elsewhere.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from hub import rbac as hub_rbac
from sandbox.launcher import System, installs
from sandbox.realkube import audit
from tests import helpers, systems
from tests.e2e.test_doctor import doctor
from tests.e2e.test_rbac_real import BASELINE, HUB, can_i_list

SITE = "site-a"
WATCHED = "default"
"""Where the launcher creates the control planes (``Options.rkcp_namespaces``)."""
UNWATCHED = "kube-system"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(real_binaries: Any, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[System]:
    directory = tmp_path_factory.mktemp("rbac-namespaced") / "sandbox"
    async with systems.running(
        directory, sites=(SITE,), base=[("c1", SITE)], kubernetes="real", hub_replicas=2,
        hub_namespaces=(WATCHED,),
    ) as w:  # fmt: skip
        yield w


def _audit(w: System) -> list[str]:
    return w.real_clusters["mgmt"].audit_log.read_text().splitlines()


def _kubectl(w: System, *args: str, kubeconfig: str = "") -> subprocess.CompletedProcess[str]:
    kubectl = str(w.real_clusters["mgmt"].binaries.kubectl)
    config = kubeconfig or str(w.kubeconfig("mgmt"))
    return subprocess.run(
        [kubectl, "--kubeconfig", config, *args], capture_output=True, text=True, check=False
    )


def _shipped(use: audit.Use) -> bool:
    rules = audit.expand(hub_rbac.RULES)
    return use in rules or audit.Use(use.group, "*", use.verb) in rules


def _ours(use: audit.Use) -> bool:
    return f"{use.resource}.{use.group}" not in BASELINE


@pytest.mark.asyncio(loop_scope="module")
async def test_a_control_plane_in_the_watched_namespace_is_ready_and_nothing_was_refused(
    world: System,
) -> None:
    rkcp = await world.mgmt.get(systems.RKCP, "c1", namespace=WATCHED)
    assert (rkcp.get("status") or {}).get("ready") is True
    lines = _audit(world)
    assert audit.refused(lines, HUB) == set()
    assert {u for u in audit.used(lines, HUB) if _ours(u) and not _shipped(u)} == set()
    # Every request of a namespaced kind was made in the watched namespace or the hub's own:
    # the watches are per namespace, none lists every namespace.
    sites = {resource for _, resource, _ in hub_rbac.CLUSTER}
    places = {ns for use, ns in audit.where(lines, HUB) if _ours(use) and use.resource not in sites}
    assert places == {WATCHED, installs.SYSTEM_NAMESPACE}, places


@pytest.mark.parametrize(
    ("namespace", "rules"),
    [
        (WATCHED, hub_rbac.NAMESPACED + hub_rbac.CLUSTER),
        (installs.SYSTEM_NAMESPACE, hub_rbac.CLUSTER + hub_rbac.OWN),
        (UNWATCHED, hub_rbac.CLUSTER),
    ],
    ids=["watched", "own-namespace", "unwatched"],
)
def test_kubectl_auth_can_i_lists_exactly_the_rules_we_ship(
    world: System, namespace: str, rules: Any
) -> None:
    assert can_i_list(world, "mgmt", HUB, namespace) == audit.expand(rules)


@pytest.mark.parametrize(
    "args",
    [
        ("get", "secrets", "-n", UNWATCHED),
        ("list", "secrets", "-n", UNWATCHED),
        ("list", "secrets", "--all-namespaces"),
        ("watch", "secrets", "--all-namespaces"),
        ("delete", "secrets", "-n", WATCHED),
        ("list", "remotekamajicontrolplanes.controlplane.cluster.x-k8s.io", "--all-namespaces"),
    ],
    ids=["get-unwatched", "list-unwatched", "list-everywhere", "watch-everywhere", "delete-watched", "rkcps"],
)
def test_the_hub_may_not_touch_secrets_beyond_its_namespaces(world: System, args: tuple[str, ...]) -> None:
    done = _kubectl(world, "auth", "can-i", *args, f"--as={HUB}")
    assert (done.returncode, done.stdout.strip()) == (1, "no"), done


@pytest.mark.asyncio(loop_scope="module")
async def test_a_cluster_wide_secret_list_as_the_hub_is_refused(world: System) -> None:
    """With the hub's own token: the server answers 403, and the audit log shows it as the only
    refusal, so the first test's empty set of refusals was not an audit log that misses them."""
    denied = audit.Use("", "secrets", "list")
    done = _kubectl(world, "get", "secrets", "--all-namespaces", kubeconfig=str(world.hub_kubeconfig("mgmt")))
    assert done.returncode == 1 and "forbidden" in done.stderr, done
    await helpers.eventually(
        lambda: audit.refused(_audit(world), HUB), lambda got: got == {denied}, within=30,
        what="the refusal in the audit log",
    )  # fmt: skip


@pytest.mark.asyncio(loop_scope="module")
async def test_doctor_checks_the_watched_namespaces(world: System) -> None:
    """doctor asks the real authorizer in each watched namespace: the hub's passes; the same hub
    told to watch one more namespace, whose RoleBinding is missing, fails naming it and the fix."""
    run = await doctor(world, "hub")
    assert run.code == 0 and run.failed() == [], run.out
    assert "permissions granted" in run.line("PASS", "rbac")
    run = await doctor(world, "hub", "--namespaces", f"{WATCHED},{UNWATCHED}")
    assert run.failed() == ["rbac"], run.out
    line = run.line("FAIL", "rbac")
    assert f"(list, core, secrets, namespace {UNWATCHED})" in line, line
    assert f"namespace {WATCHED})" not in line, line
    assert f"RoleBinding kamaji-broker-hub in each watched namespace ({WATCHED}, {UNWATCHED})" in line, line
