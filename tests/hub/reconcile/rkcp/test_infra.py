"""hub.reconcile.rkcp.infra: when the InfraCluster's endpoint is patched, and with what (tables)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest

from hub.api import cluster as cluster_api
from hub.reconcile.rkcp import decide, infra, vocabulary
from tests.hub.reconcile.rkcp.test_decide import NOW, observed, rkcp_obj, status

V1BETA1_REF = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "FooCluster", "name": "foo"}
V1BETA2_REF = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "FooCluster", "name": "foo"}
TARGET = vocabulary.PatchInfraEndpoint(
    group="infrastructure.cluster.x-k8s.io", version="v1alpha1", kind="FooCluster", name="foo",
    namespace="default", host="10.0.0.1", port=6443,
)  # fmt: skip
"""What the site reports (``status()``), on the v1beta1 reference."""


def cluster(
    ref: dict[str, Any] | None = V1BETA1_REF, *, paused: bool = False, **meta: Any
) -> cluster_api.Cluster:
    spec: dict[str, Any] = {"paused": paused}
    if ref is not None:
        spec["infrastructureRef"] = ref
    return cluster_api.Cluster.parse(
        {"metadata": {"name": "cluster-1", "namespace": "default", **meta}, "spec": spec}
    )


def outcome(
    state: vocabulary.State, *, ago: float, target: vocabulary.PatchInfraEndpoint = TARGET
) -> vocabulary.Outcome:
    return vocabulary.Outcome(target=target, state=state, reason="r", at=NOW - dt.timedelta(seconds=ago))


PAUSED_RKCP = rkcp_obj()
PAUSED_RKCP.metadata.annotations["cluster.x-k8s.io/paused"] = ""
OTHER_ENDPOINT = dataclasses.replace(TARGET, host="10.9.9.9")

DECIDE = [
    # id, observed keyword arguments, the patches planned
    ("site-reported endpoint, v1beta1 ref", {}, [TARGET]),
    ("v1beta2 ref: no version, the group's preferred one", {"cluster": cluster(V1BETA2_REF)},
     [dataclasses.replace(TARGET, version="")]),
    ("the RKCP's own endpoint wins over the report",
     {"rkcp": rkcp_obj(controlPlaneEndpoint={"host": "cp.example", "port": 443})},
     [dataclasses.replace(TARGET, host="cp.example", port=443)]),
    ("CAPI's {'', 0} on the RKCP is unset: the report is used",
     {"rkcp": rkcp_obj(controlPlaneEndpoint={"host": "", "port": 0})}, [TARGET]),
    ("no endpoint yet", {"report": vocabulary.SiteReport(status=status(endpoint=False))}, []),
    ("no report yet", {"report": vocabulary.SiteReport()}, []),
    ("no infrastructureRef", {"cluster": cluster(None)}, []),
    ("a reference without a name", {"cluster": cluster({"apiGroup": "infrastructure.cluster.x-k8s.io",
                                                        "kind": "FooCluster"})}, []),
    ("Cluster paused (spec.paused)", {"cluster": cluster(paused=True)}, []),
    ("Cluster paused (annotation)", {"cluster": cluster(annotations={"cluster.x-k8s.io/paused": ""})}, []),
    ("RKCP paused (annotation)", {"rkcp": PAUSED_RKCP}, []),
    ("no Cluster", {"cluster": None, "cluster_problem": "waiting"}, []),
    ("already set for this object and endpoint", {"infra_outcome": outcome("set", ago=9999)}, []),
    ("set for another endpoint: the new one", {"infra_outcome": outcome("set", ago=1, target=OTHER_ENDPOINT)},
     [TARGET]),
    ("refused a minute ago: not again (no retry storm)", {"infra_outcome": outcome("refused", ago=60)}, []),
    ("refused long ago: tried again",
     {"infra_outcome": outcome("refused", ago=infra.REFUSED_RETRY_SECONDS)}, [TARGET]),
    ("waiting a moment ago: not yet", {"infra_outcome": outcome("waiting", ago=1)}, []),
    ("waiting past the retry: again",
     {"infra_outcome": outcome("waiting", ago=infra.WAITING_RETRY_SECONDS)}, [TARGET]),
]  # fmt: skip


@pytest.mark.parametrize(("kw", "expected"), [row[1:] for row in DECIDE], ids=[row[0] for row in DECIDE])
def test_decide(kw: dict[str, Any], expected: list[vocabulary.Action]) -> None:
    assert infra.decide_infra(observed(**{"cluster": cluster(), **kw}), _status(kw)) == expected


def _status(kw: dict[str, Any]) -> Any:
    report = kw.get("report", vocabulary.SiteReport(status=status()))
    return report.status


def test_the_reconcile_plans_it_after_the_rkcps_own_endpoint() -> None:
    plan = decide.reconcile(observed(cluster=cluster()))
    kinds = [type(a).__name__ for a in plan.actions if not isinstance(a, vocabulary.Event)]
    assert kinds[-2:] == ["SetEndpoint", "PatchInfraEndpoint"]
    # Nothing while deleting.
    assert not any(
        isinstance(a, vocabulary.PatchInfraEndpoint)
        for a in decide.reconcile(observed(rkcp_obj(deleting=True), cluster=cluster())).actions
    )


def foo(spec: dict[str, Any] | None = None, rv: str = "7") -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "foo", "resourceVersion": rv}}
    if spec is not None:
        obj["spec"] = spec
    return obj


SET = {
    "spec": {"controlPlaneEndpoint": {"host": "10.0.0.1", "port": 6443}},
    "metadata": {"resourceVersion": "7"},
}
PATCH = [
    ("no spec", foo(), SET),
    ("unset endpoint, other fields untouched", foo({"region": "x"}), SET),
    ("CAPI's zero value", foo({"controlPlaneEndpoint": {"host": "", "port": 0}}), SET),
    ("another endpoint", foo({"controlPlaneEndpoint": {"host": "10.0.0.2", "port": 6443}}), SET),
    ("another port", foo({"controlPlaneEndpoint": {"host": "10.0.0.1", "port": 443}}), SET),
    ("already that endpoint: no patch",
     foo({"controlPlaneEndpoint": {"host": "10.0.0.1", "port": 6443}}), None),
    ("no resourceVersion: no precondition", foo(rv=""), {"spec": SET["spec"]}),
]  # fmt: skip


@pytest.mark.parametrize(("obj", "expected"), [row[1:] for row in PATCH], ids=[row[0] for row in PATCH])
def test_endpoint_patch_sets_only_the_endpoint(obj: dict[str, Any], expected: dict[str, Any] | None) -> None:
    assert infra.endpoint_patch(obj, "10.0.0.1", 6443) == expected


@pytest.mark.parametrize(
    ("obj", "kept"),
    [
        (foo({"controlPlaneEndpoint": {"host": "10.0.0.1", "port": 6443}}), True),
        (foo({"region": "x"}), False),  # pruned: the schema has no such field
        (foo(), False),
        (foo({"controlPlaneEndpoint": {"host": "10.0.0.1", "port": "6443"}}), False),
    ],
)
def test_carries(obj: dict[str, Any], kept: bool) -> None:
    assert infra.carries(obj, "10.0.0.1", 6443) is kept


BLOCKED = [
    ("not authorized", {"not_authorized": "Site site-a does not allow namespace default"}),
    ("in conflict", {"conflict_with": "other/cp"}),
]


@pytest.mark.parametrize("kw", [row[1] for row in BLOCKED], ids=[row[0] for row in BLOCKED])
def test_nothing_is_patched_for_an_object_the_hub_writes_nothing_for(kw: dict[str, Any]) -> None:
    # The review's attack: an unauthorized RKCP (no site needed) with an endpoint of its own.
    o = observed(
        rkcp_obj(controlPlaneEndpoint={"host": "evil.example", "port": 443}), cluster=cluster(), **kw
    )
    assert not [a for a in decide.reconcile(o).actions if isinstance(a, vocabulary.PatchInfraEndpoint)]


REFS = [
    # id, the target's fields changed, what the problem names ("" none)
    ("an InfraCluster of the Cluster's namespace", {}, ""),
    ("a dotted name", {"name": "foo.bar-1"}, ""),
    ("v1beta2: no version", {"version": ""}, ""),
    ("a path into another namespace", {"name": "../../victim/fooclusters/infra"},
     "spec.infrastructureRef.name"),
    ("a slash", {"name": "foo/status"}, "spec.infrastructureRef.name"),
    ("upper case", {"name": "Foo"}, "spec.infrastructureRef.name"),
    ("an encoded slash", {"name": "foo%2Fbar"}, "spec.infrastructureRef.name"),
    ("too long", {"name": "a" * 254}, "spec.infrastructureRef.name"),
    ("another group", {"group": "controlplane.cluster.x-k8s.io"}, "only infrastructure.cluster.x-k8s.io"),
    ("the core group", {"group": ""}, "only infrastructure.cluster.x-k8s.io"),
    ("a kind with a path", {"kind": "Foo/../Secret"}, "spec.infrastructureRef.kind"),
    ("a version with a path", {"version": "v1/../../v1"}, "not a Kubernetes API version"),
]  # fmt: skip


@pytest.mark.parametrize(("changes", "names"), [row[1:] for row in REFS], ids=[row[0] for row in REFS])
def test_only_an_infrastructure_object_with_a_kubernetes_name_is_written(
    changes: dict[str, Any], names: str
) -> None:
    problem = infra.ref_problem(dataclasses.replace(TARGET, **changes))
    assert (names in problem) if names else problem == ""
