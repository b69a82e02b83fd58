"""hub.controllers.rkcp.gauges: how an RKCP counts (tables over real plans), the gauges a sequence of
reconciles leaves, and the update-to-ready clock."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from hub import metrics as hub_metrics
from hub.controllers.rkcp import gauges
from hub.reconcile.rkcp import decide, vocabulary
from hub.reconcile.rkcp.vocabulary import SiteReport
from tests.hub.reconcile.rkcp.test_decide import SPEC, UID, observed, published, rkcp_obj, status

SYNCED = {"cluster-1-kubeconfig": "sum", "cluster-1-ca": "sum"}
SEALED = vocabulary.SiteReport(status=status(), secrets_checksum="sum", secrets_owner_uid=UID, secrets_seq=3)
NEWER = {**SPEC, "kubernetes": {"version": "v1.32.0"}}


@pytest.mark.parametrize(
    ("o", "expected"),
    [
        pytest.param(observed(report=SEALED, secrets_checksums=SYNCED), gauges.Standing("site-a", "Ready"),
                     id="ready-secrets-written"),
        pytest.param(observed(report=SEALED), gauges.Standing("site-a", "Ready"),
                     id="ready-secrets-written-by-this-reconcile"),
        pytest.param(observed(), gauges.Standing("site-a", "Ready", secrets_behind=True),
                     id="ready-no-secrets-yet"),
        pytest.param(observed(report=SiteReport(status=status("Upgrading"), secrets_error="no key")),
                     gauges.Standing("site-a", "Upgrading", secrets_behind=True),
                     id="upgrading-decrypt-failed"),
        pytest.param(observed(report=vocabulary.SiteReport(status=status("Provisioning"))),
                     gauges.Standing("site-a", "Provisioning"), id="provisioning-secrets-not-expected"),
        pytest.param(observed(report=vocabulary.SiteReport()), gauges.Standing("site-a", gauges.UNKNOWN),
                     id="no-status"),
        pytest.param(observed(report=vocabulary.SiteReport(status=status(owner="other-uid"))),
                     gauges.Standing("site-a", gauges.UNKNOWN), id="another-owners-status"),
        pytest.param(observed(rkcp_obj(deleting=True)), gauges.Standing("site-a", gauges.DELETING),
                     id="deleting"),
        pytest.param(observed(not_authorized="not granted"), gauges.Standing("", gauges.NOT_AUTHORIZED),
                     id="not-authorized-counts-without-a-site"),
        pytest.param(observed(rkcp_obj(finalizer=False)), gauges.Standing("site-a", "Ready"),
                     id="no-status-written-this-time-is-not-behind"),
    ],
)  # fmt: skip
def test_standing(o: vocabulary.Observed, expected: gauges.Standing) -> None:
    assert gauges.standing(o, decide.reconcile(o)) == expected


@pytest.mark.parametrize(
    ("o", "expected"),
    [
        pytest.param(observed(rkcp_obj(generation=2), desired_spec=NEWER), 2, id="new-spec-new-generation"),
        pytest.param(observed(rkcp_obj(generation=2), desired_spec=NEWER, published=None), None,
                     id="first-provision"),
        pytest.param(observed(rkcp_obj(generation=2), desired_spec=NEWER, published=published(op="delete")),
                     None, id="over-a-delete"),
        pytest.param(observed(rkcp_obj(generation=2), desired_spec=NEWER, published=published(owner="old")),
                     None, id="over-another-owners-intent"),
        pytest.param(observed(rkcp_obj(generation=1), desired_metadata={"labels": {"team": "blue"}}), None,
                     id="label-change-same-generation"),
        pytest.param(observed(rkcp_obj(generation=2)), None,
                     id="generation-moved-spec-did-not-nothing-published"),
        pytest.param(observed(rkcp_obj(generation=2), desired_spec=NEWER, not_authorized="no"), None,
                     id="nothing-published"),
    ],
)  # fmt: skip
def test_update_generation(o: vocabulary.Observed, expected: int | None) -> None:
    assert gauges.update_generation(o, decide.reconcile(o)) == expected


def serving(generation: int, phase: str = "Ready", **fields: Any) -> vocabulary.SiteReport:
    """What the site reports of a TCP running ``generation``: every replica up to date."""
    report = status(phase, generation=generation)
    return vocabulary.SiteReport(status=msgspec.structs.replace(report, **{"updated_replicas": 2, **fields}))


@pytest.mark.parametrize(
    ("o", "expected"),
    [
        pytest.param(observed(report=serving(3)), 3, id="ready-rolled-out"),
        pytest.param(observed(report=serving(3, phase="Upgrading")), None, id="upgrading"),
        # The agent reports the intent's generation once applied, before Kamaji moved: not yet.
        pytest.param(
            observed(rkcp_obj(version="v1.32.0"), report=serving(3)), None, id="old-version-running"
        ),
        pytest.param(observed(report=serving(3, updated_replicas=1)), None, id="replicas-not-up-to-date"),
        pytest.param(observed(rkcp_obj(replicas=3), report=serving(3)), None, id="scaling-up"),
        pytest.param(observed(report=serving(3, owner_uid="old")), None, id="another-owner"),
        pytest.param(observed(report=vocabulary.SiteReport()), None, id="no-status"),
        pytest.param(observed(rkcp_obj(finalizer=False), report=serving(3)), None, id="no-status-written"),
    ],
)
def test_ready_generation(o: vocabulary.Observed, expected: int | None) -> None:
    assert gauges.ready_generation(o, decide.reconcile(o)) == expected


A, B, C = ("default", "a"), ("default", "b"), ("default", "c")
READY, BEHIND = gauges.Standing("site-a", "Ready"), gauges.Standing("site-a", "Ready", secrets_behind=True)
PROV_B = gauges.Standing("site-b", "Provisioning")
DENIED = gauges.Standing("", gauges.NOT_AUTHORIZED)


@pytest.mark.parametrize(
    ("steps", "planes", "behind"),
    [
        pytest.param([(A, READY), (B, READY)], {("site-a", "Ready"): 2}, {"site-a": 0}, id="two-ready"),
        pytest.param([(A, READY), (A, READY), (A, READY)], {("site-a", "Ready"): 1}, {"site-a": 0},
                     id="a-resync-counts-once"),
        pytest.param([(A, PROV_B), (A, BEHIND)], {("site-a", "Ready"): 1}, {"site-a": 1},
                     id="moved-between-sites-and-phases"),
        pytest.param([(A, BEHIND), (B, BEHIND), (A, READY)], {("site-a", "Ready"): 2}, {"site-a": 1},
                     id="secrets-caught-up"),
        pytest.param([(A, BEHIND), (B, PROV_B), (A, None), (C, DENIED)],
                     {("site-b", "Provisioning"): 1, ("", gauges.NOT_AUTHORIZED): 1}, {"site-b": 0},
                     id="forgotten-leaves-no-series"),
        pytest.param([(A, None)], {}, {}, id="forgetting-the-unknown"),
    ],
)  # fmt: skip
def test_gauges_follow_each_rkcp(
    steps: list[tuple[tuple[str, str], gauges.Standing | None]],
    planes: dict[tuple[str, str], float],
    behind: dict[str, float],
) -> None:
    metrics = hub_metrics.Metrics()
    counts = gauges.Gauges(metrics)
    for key, standing in steps:
        if standing is None:
            counts.forget(key)
        else:
            counts.note(key, standing)
    assert samples(metrics, "kb_hub_control_planes", ("site", "phase")) == planes
    assert samples(metrics, "kb_hub_secrets_not_synced", ("site",)) == {(k,): v for k, v in behind.items()}


def samples(metrics: hub_metrics.Metrics, name: str, labels: tuple[str, ...]) -> dict[tuple[str, ...], float]:
    [family] = [f for f in metrics.registry.collect() if f.name == name]
    return {tuple(s.labels[label] for label in labels): s.value for s in family.samples}


def test_update_to_ready_is_timed_from_the_newest_update_to_ready_at_it() -> None:
    metrics = hub_metrics.Metrics()
    counts = gauges.Gauges(metrics)
    key = ("default", "cp1")

    def visit(generation: int, report: vocabulary.SiteReport, *, spec: dict[str, object], at: float) -> None:
        o = observed(rkcp_obj(generation=generation), desired_spec=spec, report=report)
        counts.reconciled(key, o, decide.reconcile(o), at=at)

    def update_ready(suffix: str) -> float | None:
        return metrics.registry.get_sample_value(f"kb_hub_update_ready_seconds_{suffix}", {"site": "site-a"})

    ready_1 = serving(1)
    visit(2, ready_1, spec=NEWER, at=100.0)  # update to generation 2 published
    visit(2, serving(2, phase="Upgrading"), spec=SPEC, at=101.0)
    visit(2, ready_1, spec=SPEC, at=102.0)  # an old Ready says nothing of generation 2
    visit(2, serving(2, updated_replicas=1), spec=SPEC, at=103.0)  # still rolling out
    assert update_ready("count") is None
    visit(2, serving(2), spec=SPEC, at=107.5)
    visit(2, serving(2), spec=SPEC, at=120.0)  # once
    assert update_ready("count") == 1.0
    assert update_ready("sum") == 7.5
    # Forgotten (deleted) before Ready: nothing is timed, ever.
    visit(2, ready_1, spec=NEWER, at=200.0)
    counts.forget(key)
    visit(2, serving(2), spec=SPEC, at=210.0)
    assert update_ready("count") == 1.0
