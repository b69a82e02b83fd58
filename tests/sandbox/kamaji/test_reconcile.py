"""sandbox.kamaji.reconcile: the simulator's pure decisions, as tables (no cluster, no clock)."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.kamaji import reconcile, reconcile_status
from sandbox.kamaji.reconcile import (
    FINALIZER,
    AddFinalizer,
    Memory,
    RemoveFinalizer,
    SecretsObserved,
    Timings,
    WriteAdminKubeconfig,
    WriteCA,
)
from sandbox.kamaji.reconcile_status import Phase

UID = "uid-1"
POOL_ADDRESS = "10.240.0.7"
SERVER = f"https://{POOL_ADDRESS}:6443"
SVC = "https://tcp1.tenants.svc:6443"
TIMINGS = Timings(ready_delay=3.0, delete_delay=5.0)
SECRETS_OK = SecretsObserved(ca=True, admin_kubeconfig_server=SERVER)


def tcp(
    *,
    version: str = "v1.30.2",
    replicas: int | None = 2,
    finalizers: tuple[str, ...] = (FINALIZER,),
    deleting: bool = False,
    address: str | None = None,
    port: int | None = None,
    status: dict[str, Any] | None = None,
    uid: str = UID,
) -> dict[str, Any]:
    """A TenantControlPlane object as the API server returns it."""
    spec: dict[str, Any] = {
        "controlPlane": {"service": {"serviceType": "LoadBalancer"}, "deployment": {}},
        "kubernetes": {"version": version, "kubelet": {"cgroupfs": "systemd"}},
        "networkProfile": {},
    }
    if replicas is not None:
        spec["controlPlane"]["deployment"]["replicas"] = replicas
    if address is not None:
        spec["networkProfile"]["address"] = address
    if port is not None:
        spec["networkProfile"]["port"] = port
    metadata: dict[str, Any] = {
        "name": "tcp1",
        "namespace": "tenants",
        "uid": uid,
        "generation": 3,
        "resourceVersion": "42",
        "finalizers": list(finalizers),
    }
    if deleting:
        metadata["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    obj: dict[str, Any] = {"apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane"}
    obj |= {"metadata": metadata, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def status(phase: Phase, installed: str | None, counts: dict[str, int]) -> dict[str, Any]:
    """An observed status as the simulator writes it (``counts``: the deployment's)."""
    version: dict[str, Any] = {"status": str(phase)}
    if installed:
        version["version"] = installed
    deployment = {"name": "tcp1", "namespace": "tenants", "selector": "kamaji.clastix.io/name=tcp1"} | counts
    return {
        "observedGeneration": 3,
        "controlPlaneEndpoint": f"{POOL_ADDRESS}:6443",
        "kubeconfig": {"admin": {"secretName": "tcp1-admin-kubeconfig"}},
        "certificates": {"ca": {"secretName": "tcp1-ca"}},
        "storage": {"dataStoreName": "default"},
        "kubernetesResources": {"version": version, "deployment": deployment},
    }


READY_COUNTS = {
    "replicas": 2,
    "readyReplicas": 2,
    "availableReplicas": 2,
    "updatedReplicas": 2,
    "unavailableReplicas": 0,
}
STARTING_COUNTS = {
    "replicas": 2,
    "readyReplicas": 0,
    "availableReplicas": 0,
    "updatedReplicas": 2,
    "unavailableReplicas": 2,
}
UPGRADING_COUNTS = {
    "replicas": 2,
    "readyReplicas": 2,
    "availableReplicas": 2,
    "updatedReplicas": 0,
    "unavailableReplicas": 0,
}
SLEEPING_COUNTS = {
    "replicas": 0,
    "readyReplicas": 0,
    "availableReplicas": 0,
    "updatedReplicas": 0,
    "unavailableReplicas": 0,
}


def observe(obj: dict[str, Any], secrets: SecretsObserved = SECRETS_OK) -> reconcile.Observed:
    return reconcile.new_observed(obj, secrets=secrets, allocated_address=POOL_ADDRESS)


def timing(phase: Phase, since: float, version: str = "v1.30.2") -> Memory:
    return Memory(uid=UID, phase=str(phase), target=version, since=since)


# (id, object, secrets, memory, now, actions, written phase (None: no status write), installed, requeue_after)
NORMAL_CASES: list[
    tuple[str, dict[str, Any], SecretsObserved, Memory, float, tuple[Any, ...], Any, Any, Any]
] = [
    (
        "new TCP: finalizer first, secrets, Provisioning",
        tcp(finalizers=()),
        SecretsObserved(),
        Memory(),
        100.0,
        (AddFinalizer(), WriteCA(), WriteAdminKubeconfig(server=SERVER, svc_server=SVC)),
        Phase.PROVISIONING,
        None,
        3.0,
    ),
    (
        "provisioning, delay not over: nothing to write, come back",
        tcp(status=status(Phase.PROVISIONING, None, STARTING_COUNTS)),
        SECRETS_OK,
        timing(Phase.PROVISIONING, 100.0),
        101.0,
        (),
        None,
        None,
        2.0,
    ),
    (
        "provisioning, delay over: Ready with the version installed",
        tcp(status=status(Phase.PROVISIONING, None, STARTING_COUNTS)),
        SECRETS_OK,
        timing(Phase.PROVISIONING, 100.0),
        103.0,
        (),
        Phase.READY,
        "v1.30.2",
        None,
    ),
    (
        "provisioning seen first by a restarted simulator: the delay starts now",
        tcp(status=status(Phase.PROVISIONING, None, STARTING_COUNTS)),
        SECRETS_OK,
        Memory(uid=UID),
        500.0,
        (),
        None,
        None,
        3.0,
    ),
    (
        "ready and unchanged: no writes, no timer",
        tcp(status=status(Phase.READY, "v1.30.2", READY_COUNTS)),
        SECRETS_OK,
        Memory(uid=UID),
        100.0,
        (),
        None,
        "v1.30.2",
        None,
    ),
    (
        "version changed: Upgrading, old version still installed",
        tcp(version="v1.31.0", status=status(Phase.READY, "v1.30.2", READY_COUNTS)),
        SECRETS_OK,
        Memory(uid=UID),
        100.0,
        (),
        Phase.UPGRADING,
        "v1.30.2",
        3.0,
    ),
    (
        "upgrading, delay over: Ready on the new version",
        tcp(version="v1.31.0", status=status(Phase.UPGRADING, "v1.30.2", UPGRADING_COUNTS)),
        SECRETS_OK,
        timing(Phase.UPGRADING, 100.0, "v1.31.0"),
        103.5,
        (),
        Phase.READY,
        "v1.31.0",
        None,
    ),
    (
        "version changed again mid-upgrade: the delay restarts",
        tcp(version="v1.32.0", status=status(Phase.UPGRADING, "v1.30.2", UPGRADING_COUNTS)),
        SECRETS_OK,
        timing(Phase.UPGRADING, 100.0, "v1.31.0"),
        102.0,
        (),
        None,
        "v1.30.2",
        3.0,
    ),
    (
        "replicas 0: Sleeping at once",
        tcp(replicas=0, status=status(Phase.READY, "v1.30.2", READY_COUNTS)),
        SECRETS_OK,
        Memory(uid=UID),
        100.0,
        (),
        Phase.SLEEPING,
        "v1.30.2",
        None,
    ),
    (
        "woken up: NotReady until the delay is over",
        tcp(replicas=2, status=status(Phase.SLEEPING, "v1.30.2", SLEEPING_COUNTS)),
        SECRETS_OK,
        Memory(uid=UID),
        100.0,
        (),
        Phase.NOT_READY,
        "v1.30.2",
        3.0,
    ),
    (
        "woken up, delay over: Ready",
        tcp(replicas=2, status=status(Phase.NOT_READY, "v1.30.2", STARTING_COUNTS)),
        SECRETS_OK,
        timing(Phase.NOT_READY, 100.0),
        103.0,
        (),
        Phase.READY,
        "v1.30.2",
        None,
    ),
    (
        "admin kubeconfig points elsewhere: reissue it only",
        tcp(status=status(Phase.READY, "v1.30.2", READY_COUNTS)),
        SecretsObserved(ca=True, admin_kubeconfig_server="https://10.0.0.1:6443"),
        Memory(uid=UID),
        100.0,
        (WriteAdminKubeconfig(server=SERVER, svc_server=SVC),),
        None,
        "v1.30.2",
        None,
    ),
    (
        "CA missing (or not ours): new CA and kubeconfigs signed by it",
        tcp(status=status(Phase.READY, "v1.30.2", READY_COUNTS)),
        SecretsObserved(ca=False, admin_kubeconfig_server=SERVER),
        Memory(uid=UID),
        100.0,
        (WriteCA(), WriteAdminKubeconfig(server=SERVER, svc_server=SVC)),
        None,
        "v1.30.2",
        None,
    ),
    (
        "same name, new uid: the old object's timer does not carry over",
        tcp(uid="uid-2", status=status(Phase.PROVISIONING, None, STARTING_COUNTS)),
        SECRETS_OK,
        timing(Phase.PROVISIONING, 0.0),
        100.0,
        (),
        None,
        None,
        3.0,
    ),
]


@pytest.mark.parametrize(
    ("obj", "secrets", "memory", "now", "actions", "phase", "installed", "requeue_after"),
    [case[1:] for case in NORMAL_CASES],
    ids=[case[0] for case in NORMAL_CASES],
)
def test_reconcile_normal(
    obj: dict[str, Any],
    secrets: SecretsObserved,
    memory: Memory,
    now: float,
    actions: tuple[Any, ...],
    phase: Phase | None,
    installed: str | None,
    requeue_after: float | None,
) -> None:
    plan = reconcile.reconcile(observe(obj, secrets), memory, now=now, timings=TIMINGS)
    assert plan.actions == actions
    assert plan.requeue_after == requeue_after
    if phase is None:
        assert plan.status is None
        return
    assert plan.status is not None
    assert plan.status["kubernetesResources"]["version"] == (
        {"status": str(phase), "version": installed} if installed else {"status": str(phase)}
    )


@pytest.mark.parametrize(
    ("phase", "counts"),
    [
        (Phase.PROVISIONING, STARTING_COUNTS),
        (Phase.NOT_READY, STARTING_COUNTS),
        (Phase.UPGRADING, UPGRADING_COUNTS),
        (Phase.READY, READY_COUNTS),
        (Phase.SLEEPING, SLEEPING_COUNTS),
    ],
)
def test_deployment_counts_follow_the_phase(phase: Phase, counts: dict[str, int]) -> None:
    new = reconcile_status.new_status(observe(tcp()), phase=phase, installed="v1.30.2", host=POOL_ADDRESS)
    deployment = new["kubernetesResources"]["deployment"]
    assert {k: deployment[k] for k in counts} == counts
    assert deployment["selector"] == "kamaji.clastix.io/name=tcp1"


def test_new_status_names_the_secrets_and_the_endpoint() -> None:
    new = reconcile_status.new_status(
        observe(tcp()), phase=Phase.READY, installed="v1.30.2", host=POOL_ADDRESS
    )
    assert new == status(Phase.READY, "v1.30.2", READY_COUNTS)


@pytest.mark.parametrize(
    ("address", "port", "endpoint", "server"),
    [
        (None, None, f"{POOL_ADDRESS}:6443", SERVER),
        ("192.0.2.10", None, "192.0.2.10:6443", "https://192.0.2.10:6443"),
        ("192.0.2.10", 443, "192.0.2.10:443", "https://192.0.2.10:443"),
        ("cp.example.com", 8443, "cp.example.com:8443", "https://cp.example.com:8443"),
        ("2001:db8::10", 6443, "[2001:db8::10]:6443", "https://[2001:db8::10]:6443"),
    ],
    ids=["pool address", "spec address", "spec address and port", "hostname", "IPv6"],
)
def test_endpoint(address: str | None, port: int | None, endpoint: str, server: str) -> None:
    plan = reconcile.reconcile(
        observe(tcp(address=address, port=port, finalizers=()), SecretsObserved()),
        Memory(),
        now=0.0,
        timings=TIMINGS,
    )
    assert plan.status is not None
    assert plan.status["controlPlaneEndpoint"] == endpoint
    svc_port = port or 6443
    assert plan.actions[-1] == WriteAdminKubeconfig(
        server=server, svc_server=f"https://tcp1.tenants.svc:{svc_port}"
    )


def test_zero_ready_delay_makes_a_new_tcp_ready_at_once() -> None:
    plan = reconcile.reconcile(observe(tcp()), Memory(), now=0.0, timings=Timings(ready_delay=0.0))
    assert plan.status is not None
    assert plan.status["kubernetesResources"]["version"] == {"status": "Ready", "version": "v1.30.2"}
    assert plan.requeue_after is None


def test_status_write_leaves_fields_it_does_not_own() -> None:
    # Kamaji (or anyone) may have written more; the plan compares only the fields it owns.
    observed = status(Phase.READY, "v1.30.2", READY_COUNTS)
    observed["addons"] = {"coreDNS": {"enabled": True}}
    observed["kubernetesResources"]["deployment"]["conditions"] = []
    plan = reconcile.reconcile(observe(tcp(status=observed)), Memory(uid=UID), now=0.0, timings=TIMINGS)
    assert (plan.actions, plan.status) == ((), None)


# (id, object, memory, now, delete_delay, actions, requeue_after, deleting_since)
DELETE_CASES: list[tuple[str, dict[str, Any], Memory, float, float, tuple[Any, ...], Any, Any]] = [
    (
        "deletion first seen: hold the finalizer for the delay",
        tcp(deleting=True),
        Memory(uid=UID),
        50.0,
        5.0,
        (),
        5.0,
        50.0,
    ),
    (
        "delay not over",
        tcp(deleting=True),
        Memory(uid=UID, deleting_since=50.0),
        53.0,
        5.0,
        (),
        2.0,
        50.0,
    ),
    (
        "delay over: remove the finalizer",
        tcp(deleting=True),
        Memory(uid=UID, deleting_since=50.0),
        55.0,
        5.0,
        (RemoveFinalizer(),),
        None,
        50.0,
    ),
    ("zero delay: remove at once", tcp(deleting=True), Memory(), 50.0, 0.0, (RemoveFinalizer(),), None, 50.0),
    (
        "our finalizer already gone: nothing to do",
        tcp(deleting=True, finalizers=("other.example.com/keep",)),
        Memory(uid=UID),
        50.0,
        5.0,
        (),
        None,
        None,
    ),
]


@pytest.mark.parametrize(
    ("obj", "memory", "now", "delete_delay", "actions", "requeue_after", "deleting_since"),
    [case[1:] for case in DELETE_CASES],
    ids=[case[0] for case in DELETE_CASES],
)
def test_reconcile_delete(
    obj: dict[str, Any],
    memory: Memory,
    now: float,
    delete_delay: float,
    actions: tuple[Any, ...],
    requeue_after: float | None,
    deleting_since: float | None,
) -> None:
    plan = reconcile.reconcile(observe(obj), memory, now=now, timings=Timings(delete_delay=delete_delay))
    assert plan.actions == actions
    assert plan.status is None, "a deleting TCP's status is left alone"
    assert plan.requeue_after == requeue_after
    assert plan.memory.deleting_since == deleting_since


def test_new_observed_applies_kamajis_defaults() -> None:
    observed = reconcile.new_observed(tcp(replicas=None))
    assert (observed.replicas, observed.port, observed.address, observed.data_store) == (2, 6443, "", "")
    assert reconcile.new_observed(tcp(replicas=0)).replicas == 0
    assert reconcile.new_observed(tcp(deleting=True)).deleting is True
    assert reconcile.new_observed({"metadata": {"name": "bare"}}).status == {}


@pytest.mark.parametrize(
    ("part", "whole", "expected"),
    [
        ({}, {}, True),
        ({"a": 1}, {"a": 1, "b": 2}, True),
        ({"a": 1}, {"a": 2}, False),
        ({"a": 1}, {}, False),
        ({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}}, True),
        ({"a": {"b": 1}}, {"a": {"b": 2}}, False),
        ({"a": {"b": 1}}, {"a": "scalar"}, False),
        ({"a": [1, 2]}, {"a": [1, 2]}, True),
        ({"a": [1]}, {"a": [1, 2]}, False),
    ],
)
def test_is_subset(part: dict[str, Any], whole: dict[str, Any], expected: bool) -> None:
    assert reconcile_status.is_subset(part, whole) is expected
