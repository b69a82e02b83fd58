"""hub.reconcile.rkcp.decide: every situation of the reconcile as a table row (observed → actions,
conditions)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest

from hub import conditions as c
from hub.api import cluster
from hub.api import rkcp as api
from hub.reconcile.rkcp import decide, intents, secrets, vocabulary
from hub.reconcile.rkcp.facts import SiteView
from hub.reconcile.rkcp.published import Op, Published
from protocol import messages

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
UID = "rkcp-uid"
SPEC = {"kubernetes": {"version": "v1.31.0"}, "controlPlane": {"deployment": {"replicas": 2}}}


def rkcp_obj(
    *, finalizer: bool = True, deleting: bool = False, generation: int = 1, **spec: Any
) -> api.RemoteKamajiControlPlane:
    meta: dict[str, Any] = {
        "name": "cp1",
        "namespace": "default",
        "uid": UID,
        "generation": generation,
        "creationTimestamp": "2026-11-30T11:00:00Z",
        "finalizers": [vocabulary.FINALIZER] if finalizer else [],
        # The hub stamps the owner identity in the finalizer's patch (hub.reconcile.rkcp.owner).
        "annotations": {api.OWNER_UID_ANNOTATION: UID} if finalizer else {},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-30T11:59:00Z"
    return api.RemoteKamajiControlPlane.parse(
        {"metadata": meta, "spec": {"site": "site-a", "version": "v1.31.0", **spec}}
    )


def status(
    phase: str = "Ready",
    *,
    seq: int = 5,
    owner: str = UID,
    reason: str = "",
    endpoint: bool = True,
    generation: int = 0,
) -> messages.Status:
    return messages.Status(
        site="site-a",
        namespace="default",
        name="cp1",
        owner_uid=owner,
        observed_generation=generation,
        intent_seq=seq,
        phase=phase,  # type: ignore[arg-type]
        reason=reason,
        version="v1.31.0",
        endpoint=messages.Endpoint(host="10.0.0.1", port=6443) if endpoint else None,
        replicas=2,
        ready_replicas=2,
        observed_at=NOW,
    )


def published(
    *,
    op: str = "provision",
    seq: int = 5,
    generation: int = 1,
    owner: str = UID,
    spec: dict[str, Any] | None = None,
) -> Published:
    return Published(
        seq=seq,
        op=Op(op),
        generation=generation,
        owner_uid=owner,
        spec_digest=intents.spec_digest(SPEC if spec is None else spec),
    )


def observed(r: api.RemoteKamajiControlPlane | None = None, **kw: Any) -> vocabulary.Observed:
    defaults: dict[str, Any] = {
        "rkcp": r or rkcp_obj(),
        "cluster": cluster.Cluster.parse({"metadata": {"name": "cluster-1", "namespace": "default"}}),
        "cluster_problem": "",
        "desired_spec": SPEC,
        "published": published(),
        "report": vocabulary.SiteReport(status=status()),
        "site": SiteView(connected=True, last_heartbeat_time=NOW),
        "secrets_checksums": {},
        "cluster_name": "cluster-1",
        "now": NOW,
    }
    defaults.update(kw)
    return vocabulary.Observed(**defaults)


def kinds(plan: vocabulary.Plan) -> list[str]:
    return [type(a).__name__ for a in plan.actions if not isinstance(a, vocabulary.Event)]


def cond(plan: vocabulary.Plan, type_: str) -> tuple[str, str]:
    assert plan.status is not None
    found = c.get(plan.status.conditions, type_)
    assert found is not None
    return found.status, found.reason


CASES: list[tuple[str, vocabulary.Observed, list[str], dict[str, tuple[str, str]]]] = [
    (
        "finalizer first, nothing else",
        observed(rkcp_obj(finalizer=False), published=None),
        ["AddFinalizer"],
        {},
    ),
    (
        "a site that appeared after the start: its topology first, then the finalizer",
        observed(rkcp_obj(finalizer=False), published=None, topology_ready=False),
        ["EnsureTopology", "AddFinalizer"],
        {},
    ),
    (
        "a site that appeared after the start: its topology first, then the intent",
        observed(published=None, report=vocabulary.SiteReport(), topology_ready=False),
        ["EnsureTopology", "Publish"],
        {"IntentDelivered": ("Unknown", "NotPublished")},
    ),
    (
        "new object: publish the intent",
        observed(published=None, report=vocabulary.SiteReport()),
        ["Publish"],
        {
            "IntentDelivered": ("Unknown", "NotPublished"),
            "TenantControlPlaneReady": ("Unknown", "NoStatus"),
            "Ready": ("Unknown", "MultipleUnknownReported"),
        },
    ),
    (
        "resync of an unchanged object publishes nothing",
        observed(),
        ["SetEndpoint"],
        {
            "IntentDelivered": ("True", "Acknowledged"),
            "Available": ("True", "Available"),
            "SiteConnected": ("True", "HeartbeatReceived"),
        },
    ),
    (
        "spec change: exactly one new intent",
        observed(desired_spec={**SPEC, "dataStore": "etcd"}),
        ["Publish", "SetEndpoint"],
        {},
    ),
    (
        "generation change that the TCP does not see: no intent",
        observed(rkcp_obj(generation=2)),
        ["SetEndpoint"],
        {},
    ),
    (
        "an intent of the previous owner is replaced",
        observed(
            published=published(owner="old-uid"), report=vocabulary.SiteReport(status=status(owner="old-uid"))
        ),
        ["Publish"],
        {"TenantControlPlaneReady": ("Unknown", "NoStatus")},
    ),
    (
        "no owner Cluster: wait, no intent",
        observed(
            cluster=None,
            cluster_problem="waiting for an ownerReference to a Cluster",
            desired_spec=None,
            published=None,
            report=vocabulary.SiteReport(),
        ),
        [],
        {"Ready": ("False", "WaitingForCluster")},
    ),
    (
        "an intent too large: its own reason, no intent",
        observed(
            cluster_problem="metadata.annotations: 150264 bytes of JSON; ... an intent carries",
            cluster_problem_reason="IntentTooLarge",
            desired_spec=None,
            published=None,
            report=vocabulary.SiteReport(),
        ),
        [],
        {"Ready": ("False", "IntentTooLarge")},
    ),
    (
        "paused Cluster: Paused, no intent",
        observed(
            cluster=cluster.Cluster.parse(
                {"metadata": {"name": "c", "annotations": {"cluster.x-k8s.io/paused": ""}}}
            ),
            published=None,
        ),
        [],
        {"Paused": ("True", "Paused"), "Ready": ("False", "Paused")},
    ),
    (
        "younger of two claiming one TCP: Conflict, no intent",
        observed(conflict_with="default/older", published=None, report=vocabulary.SiteReport()),
        [],
        {"Ready": ("False", "Conflict")},
    ),
    (
        "site rejected the TCP: the reason shows",
        observed(
            report=vocabulary.SiteReport(
                status=status("Rejected", reason="NamespaceNotFound", endpoint=False)
            )
        ),
        [],
        {"TenantControlPlaneReady": ("False", "NamespaceNotFound"), "Available": ("False", "NotAvailable")},
    ),
    (
        "site silent",
        observed(site=SiteView(connected=False, last_heartbeat_time=NOW - dt.timedelta(minutes=5))),
        ["SetEndpoint"],
        {"SiteConnected": ("False", "HeartbeatMissing"), "StatusFresh": ("False", "SiteSilent")},
    ),
    (
        "site's credential revoked (its Site deleted, operator mode): says so, not a missing heartbeat",
        observed(
            site=SiteView(connected=False, last_heartbeat_time=NOW - dt.timedelta(minutes=5), revoked=True)
        ),
        ["SetEndpoint"],
        {"SiteConnected": ("False", "CredentialsRevoked"), "Ready": ("False", "CredentialsRevoked")},
    ),
    (
        "intent not yet applied by the site",
        observed(published=published(seq=9), report=vocabulary.SiteReport(status=status(seq=5))),
        ["SetEndpoint"],
        {"IntentDelivered": ("False", "Pending"), "StatusFresh": ("False", "Outdated")},
    ),
    (
        "secrets arrived: write them",
        observed(
            report=vocabulary.SiteReport(status=status(), secrets_checksum="abc", secrets_owner_uid=UID)
        ),
        ["WriteSecrets", "SetEndpoint"],
        {"SecretsSynced": ("True", "Synced")},
    ),
    (
        "secrets already written: nothing",
        observed(
            report=vocabulary.SiteReport(status=status(), secrets_checksum="abc", secrets_owner_uid=UID),
            secrets_checksums={"cluster-1-kubeconfig": "abc", "cluster-1-ca": "abc"},
        ),
        ["SetEndpoint"],
        {"SecretsSynced": ("True", "Synced")},
    ),
    (
        "secrets naming another owner: never written",
        observed(
            report=vocabulary.SiteReport(
                status=status(), secrets_checksum="abc", secrets_owner_uid="victim-uid"
            )
        ),
        ["SetEndpoint"],
        {"SecretsSynced": ("False", "OwnerMismatch")},
    ),
    (
        "secrets naming no owner: never written",
        observed(report=vocabulary.SiteReport(status=status(), secrets_checksum="abc")),
        ["SetEndpoint"],
        {"SecretsSynced": ("False", "OwnerMismatch")},
    ),
    (
        "a conflicting RKCP gets no secrets, even its own uid's",
        observed(
            conflict_with="default/older",
            report=vocabulary.SiteReport(secrets_checksum="abc", secrets_owner_uid=UID),
        ),
        [],
        {"SecretsSynced": ("False", "Conflict"), "Ready": ("False", "Conflict")},
    ),
    (
        "not authorized: no intent, no secrets, Ready says why",
        observed(
            not_authorized="site site-a does not grant namespace default the target namespace tenants",
            published=None,
            report=vocabulary.SiteReport(secrets_checksum="abc", secrets_owner_uid=UID),
        ),
        [],
        {"SecretsSynced": ("False", "NotAuthorized"), "Ready": ("False", "NotAuthorized")},
    ),
    (
        "paused: secrets are not written",
        observed(
            cluster=cluster.Cluster.parse({"metadata": {"name": "c"}, "spec": {"paused": True}}),
            report=vocabulary.SiteReport(status=status(), secrets_checksum="abc", secrets_owner_uid=UID),
        ),
        [],
        {"Paused": ("True", "Paused"), "SecretsSynced": ("False", "Paused")},
    ),
    (
        "secrets sealed to an unknown key",
        observed(
            report=vocabulary.SiteReport(status=status(), secrets_error="sealed to unknown key id 'ab'")
        ),
        ["SetEndpoint"],
        {"SecretsSynced": ("False", "DecryptFailed")},
    ),
    (
        "endpoint already set: not written again",
        observed(rkcp_obj(controlPlaneEndpoint={"host": "10.9.9.9", "port": 6443})),
        [],
        {},
    ),
]


@pytest.mark.parametrize(("o", "actions", "conds"), [x[1:] for x in CASES], ids=[x[0] for x in CASES])
def test_reconcile_normal(
    o: vocabulary.Observed, actions: list[str], conds: dict[str, tuple[str, str]]
) -> None:
    plan = decide.reconcile(o)
    assert kinds(plan) == actions
    for type_, expected in conds.items():
        assert cond(plan, type_) == expected, type_


OWN = vocabulary.SiteReport(secrets_checksum="abc", secrets_owner_uid=UID)
OTHERS = vocabulary.SiteReport(secrets_checksum="abc", secrets_owner_uid="x")
REFUSALS = [
    ("owner mismatch", {"report": OTHERS}, "OwnerMismatch", []),
    ("conflict", {"conflict_with": "default/older", "report": OWN}, "Conflict", []),
    ("not authorized", {"not_authorized": "no", "report": OWN}, "NotAuthorized", []),
    (
        "paused",
        {"cluster": cluster.Cluster.parse({"spec": {"paused": True}}), "report": OWN},
        "Paused",
        [],
    ),
    ("conflict, nothing sealed", {"conflict_with": "default/older", "report": vocabulary.SiteReport()},
     "", []),
    ("own secrets: written, naming their owner", {"report": OWN}, "", [UID]),
]  # fmt: skip


@pytest.mark.parametrize(("kw", "reason", "writes"), [x[1:] for x in REFUSALS], ids=[x[0] for x in REFUSALS])
def test_refused_secrets_are_reported_for_counting(
    kw: dict[str, Any], reason: str, writes: list[str]
) -> None:
    plan = decide.reconcile(observed(**kw))
    assert plan.secrets_refused == reason
    assert [a.owner_uid for a in plan.actions if isinstance(a, vocabulary.WriteSecrets)] == writes


SEALED = vocabulary.SiteReport(status=status(), secrets_checksum="abc", secrets_owner_uid=UID)
KC, CA = "cluster-1-kubeconfig", "cluster-1-ca"
SECRETS: list[tuple[str, vocabulary.SiteReport, dict[str, str], str, list[vocabulary.WriteSecrets]]] = [
    # After a restart the hub holds no plaintext, only what it read of the box: the
    # decision is made from checksums alone, and a write means "fetch, open, write".
    ("nothing sealed yet", vocabulary.SiteReport(status=status()), {}, "Waiting", []),
    ("nothing sealed, Secrets of an earlier box", vocabulary.SiteReport(status=status()), {KC: "x", CA: "x"},
     "Waiting", []),
    ("sealed, CAPI Secrets missing: written", SEALED, {}, "Synced", [vocabulary.WriteSecrets("abc", UID)]),
    ("sealed, one Secret missing: written", SEALED, {KC: "abc"}, "Synced",
     [vocabulary.WriteSecrets("abc", UID)]),
    ("sealed, Secrets stale: written", SEALED, {KC: "old", CA: "old"}, "Synced",
     [vocabulary.WriteSecrets("abc", UID)]),
    ("sealed, Secrets current: nothing", SEALED, {KC: "abc", CA: "abc"}, "Synced", []),
    ("the latest box does not open: nothing, whatever is written",
     dataclasses.replace(SEALED, secrets_error="sealed to unknown key id 'ab'"), {KC: "old", CA: "old"},
     "DecryptFailed", []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("report", "checksums", "state", "writes"), [x[1:] for x in SECRETS], ids=[x[0] for x in SECRETS]
)
def test_secrets_are_decided_from_checksums(
    report: vocabulary.SiteReport,
    checksums: dict[str, str],
    state: str,
    writes: list[vocabulary.WriteSecrets],
) -> None:
    decision = secrets.decide_secrets(observed(report=report, secrets_checksums=checksums))
    assert (decision.state, decision.actions) == (state, writes)


def test_publish_is_fenced_on_the_sequence_it_saw() -> None:
    plan = decide.reconcile(observed(desired_spec={**SPEC, "x": 1}, published=published(seq=41)))
    [publish] = [a for a in plan.actions if isinstance(a, vocabulary.Publish)]
    assert (publish.op, publish.expected_last_seq, publish.spec) == ("provision", 41, {**SPEC, "x": 1})


LABELLED = {"labels": {"team": "blue"}, "annotations": {}}
NO_METADATA: dict[str, dict[str, str]] = {"labels": {}, "annotations": {}}


@pytest.mark.parametrize(
    ("wanted", "published_with", "publishes"),
    [
        (NO_METADATA, None, False),
        (LABELLED, None, True),
        (LABELLED, LABELLED, False),
        ({"labels": {"team": "red"}, "annotations": {}}, LABELLED, True),
        (NO_METADATA, LABELLED, True),
    ],
    ids=[
        "none, as before they were carried: the same digest, nothing new",
        "a label added to the RKCP: published, though no generation moved",
        "the same labels: silent",
        "a value changed",
        "the last label removed",
    ],
)
def test_propagated_metadata_is_published_when_it_changes(
    wanted: dict[str, dict[str, str]], published_with: dict[str, dict[str, str]] | None, publishes: bool
) -> None:
    """The RKCP's labels and annotations travel in the intent; a change to them is a
    change of the intent (the digest covers them) even at the same generation and spec."""
    before = dataclasses.replace(published(), spec_digest=intents.spec_digest(SPEC, published_with))
    plan = decide.reconcile(observed(desired_metadata=wanted, published=before))
    found = [a for a in plan.actions if isinstance(a, vocabulary.Publish)]
    assert bool(found) is publishes
    if found:
        assert found[0].metadata == wanted


def test_ready_status_fields_and_initialized_never_resets() -> None:
    plan = decide.reconcile(observed(report=vocabulary.SiteReport(status=status())))
    assert plan.status is not None and plan.first_ready
    s = plan.status
    assert (s.ready, s.initialized, s.initialization.control_plane_initialized) == (True, True, True)
    assert (s.version, s.replicas, s.ready_replicas) == ("v1.31.0", 2, 2)
    # The plan sets the endpoint the site reported: the status is for the generation that makes.
    assert vocabulary.SetEndpoint(host="10.0.0.1", port=6443) in plan.actions
    assert s.external_managed_control_plane and s.observed_generation == 2
    later = rkcp_obj()
    later.status = s
    again = decide.reconcile(observed(later, report=vocabulary.SiteReport(status=status("NotReady"))))
    assert again.status is not None and again.status.initialized and not again.status.ready
    assert not again.first_ready


def test_change_only_status_is_stable() -> None:
    first = decide.reconcile(observed())
    r = rkcp_obj()
    assert first.status is not None
    r.status = first.status
    second = decide.reconcile(observed(r, now=NOW + dt.timedelta(minutes=1)))
    assert second.status == first.status  # no write on a resync that changed nothing


@pytest.mark.parametrize("later", [dt.timedelta(seconds=30), dt.timedelta(minutes=10)], ids=["30s", "10m"])
def test_heartbeats_alone_change_no_status(later: dt.timedelta) -> None:
    """At rest nothing is written: a resync after more heartbeats (the site still connected, the
    agent saying the same of itself) decides the status already stored (zero writes per RKCP at rest)."""
    first = decide.reconcile(observed())
    r = rkcp_obj()
    assert first.status is not None
    r.status = first.status
    beat = SiteView(connected=True, last_heartbeat_time=NOW + later)
    second = decide.reconcile(observed(r, now=NOW + later, site=beat))
    assert second.status == first.status


DELETES: list[tuple[str, vocabulary.Observed, list[str]]] = [
    ("publish the delete intent", observed(rkcp_obj(deleting=True)), ["Publish"]),
    (
        "a site that appeared after the start: its topology before the delete intent",
        observed(rkcp_obj(deleting=True), topology_ready=False),
        ["EnsureTopology", "Publish"],
    ),
    (
        "wait for the site",
        observed(
            rkcp_obj(deleting=True),
            published=published(op="delete", seq=6),
            report=vocabulary.SiteReport(status=status("Deleting", seq=5)),
        ),
        [],
    ),
    (
        "site reports Deleted: purge, release",
        observed(
            rkcp_obj(deleting=True),
            published=published(op="delete", seq=6),
            report=vocabulary.SiteReport(status=status("Deleted", seq=6)),
        ),
        ["Purge", "RemoveFinalizer"],
    ),
    (
        "a Deleted older than the delete intent: wait for the answer",
        observed(
            rkcp_obj(deleting=True),
            published=published(op="delete", seq=6),
            report=vocabulary.SiteReport(status=status("Deleted", seq=5)),
        ),
        [],
    ),
    (
        "orphan: purge without a delete intent",
        observed(rkcp_obj(deleting=True, deletionPolicy="Orphan")),
        ["Purge", "RemoveFinalizer"],
    ),
    ("never published: just release", observed(rkcp_obj(deleting=True), published=None), ["RemoveFinalizer"]),
    (
        "site silent past the timeout: release, keep the delete intent",
        observed(
            rkcp_obj(deleting=True, siteUnavailableDeletionTimeout="10m"),
            published=published(op="delete", seq=6),
            site=SiteView(connected=False, last_heartbeat_time=NOW - dt.timedelta(minutes=11)),
        ),
        ["Release", "RemoveFinalizer"],
    ),
    (
        "site silent within the timeout: wait",
        observed(
            rkcp_obj(deleting=True, siteUnavailableDeletionTimeout="10m"),
            published=published(op="delete", seq=6),
            site=SiteView(connected=False, last_heartbeat_time=NOW - dt.timedelta(minutes=3)),
        ),
        [],
    ),
    (
        "no timeout set: wait forever",
        observed(
            rkcp_obj(deleting=True),
            published=published(op="delete", seq=6),
            site=SiteView(connected=False, last_heartbeat_time=NOW - dt.timedelta(days=3)),
        ),
        [],
    ),
    ("finalizer already gone", observed(rkcp_obj(deleting=True, finalizer=False)), []),
]


@pytest.mark.parametrize(("o", "actions"), [x[1:] for x in DELETES], ids=[x[0] for x in DELETES])
def test_reconcile_delete(o: vocabulary.Observed, actions: list[str]) -> None:
    plan = decide.reconcile(o)
    assert kinds(plan) == actions
    if plan.status is not None:
        assert cond(plan, "Deleting") == ("True", "WaitingForSite")


def test_site_timeout_emits_a_warning_event() -> None:
    o = observed(
        rkcp_obj(deleting=True, siteUnavailableDeletionTimeout="10m"),
        published=published(op="delete", seq=6),
        site=SiteView(connected=False, last_heartbeat_time=NOW - dt.timedelta(hours=1)),
    )
    events = [a for a in decide.reconcile(o).actions if isinstance(a, vocabulary.Event)]
    assert [(e.type, e.reason) for e in events] == [("Warning", "SiteUnavailable")]


RESIGN_CASES = [
    # (id, latest intent, hub's signing key id, deleting, expected actions)
    ("signed by the current key: nothing", "new-key", "new-key", False, []),
    ("signed before a rotation: sign it again", "old-key", "new-key", False, ["Publish"]),
    ("key not compared (no signer known)", "old-key", "", False, []),
    ("delete intent signed before a rotation: again", "old-key", "new-key", True, ["Publish"]),
    ("delete intent signed by the current key: wait", "new-key", "new-key", True, []),
]


# A replayed or purged intent: the subject no longer holds the hub's intent although the site applied one.
REPLAYS: list[tuple[str, vocabulary.Observed, list[str], str | None]] = [
    # id, observed, actions (events aside), Warning event reason
    (
        "site runs generation 4, subject holds a replayed generation 3 with the same spec: publish",
        observed(
            rkcp_obj(generation=4),
            published=published(seq=12, generation=3),
            report=vocabulary.SiteReport(
                status=status("Rejected", seq=12, reason="StaleGeneration", generation=4)
            ),
        ),
        ["Publish", "SetEndpoint"],
        "IntentDisplaced",
    ),
    (
        "replayed generation 3 with its old spec: publish (the spec differs too)",
        observed(
            rkcp_obj(generation=4),
            published=published(seq=12, generation=3, spec={"controlPlane": {"deployment": {"replicas": 3}}}),
            report=vocabulary.SiteReport(
                status=status("Rejected", seq=12, reason="StaleGeneration", generation=4)
            ),
        ),
        ["Publish", "SetEndpoint"],
        "IntentDisplaced",
    ),
    (
        "the site's plain status after the replay still shows it is ahead: publish",
        observed(
            rkcp_obj(generation=4),
            published=published(seq=12, generation=3),
            report=vocabulary.SiteReport(status=status(seq=10, generation=4)),
        ),
        ["Publish", "SetEndpoint"],
        "IntentDisplaced",
    ),
    (
        "subject purged behind the hub's back: publish",
        observed(
            rkcp_obj(generation=4),
            published=None,
            report=vocabulary.SiteReport(status=status(seq=10, generation=4)),
        ),
        ["Publish", "SetEndpoint"],
        "IntentDisplaced",
    ),
    (
        "subject holds the same intent, not signed by the hub's key: publish",
        observed(
            rkcp_obj(generation=4),
            published=dataclasses.replace(published(seq=12, generation=4), signed=False),
            report=vocabulary.SiteReport(status=status(seq=10, generation=4)),
        ),
        ["Publish", "SetEndpoint"],
        "IntentDisplaced",
    ),
    (
        "the hub's own intent answered at its generation: nothing",
        observed(
            rkcp_obj(generation=4),
            published=published(seq=10, generation=4),
            report=vocabulary.SiteReport(status=status(seq=10, generation=4)),
        ),
        ["SetEndpoint"],
        None,
    ),
    (
        "an intent not yet applied (site behind): nothing more",
        observed(
            rkcp_obj(generation=5),
            published=published(seq=11, generation=5),
            report=vocabulary.SiteReport(status=status(seq=10, generation=4)),
        ),
        ["SetEndpoint"],
        None,
    ),
    (
        "a previous owner's status ahead of our intent: not ours, nothing",
        observed(
            published=published(seq=11, generation=1),
            report=vocabulary.SiteReport(status=status(seq=9, generation=7, owner="old-uid")),
        ),
        [],
        None,
    ),
    (
        "empty subject and a Deleted status (the TCP went away): a plain first publish",
        observed(
            published=None, report=vocabulary.SiteReport(status=status("Deleted", seq=9, endpoint=False))
        ),
        ["Publish"],
        None,
    ),
]


@pytest.mark.parametrize(("o", "actions", "warning"), [x[1:] for x in REPLAYS], ids=[x[0] for x in REPLAYS])
def test_reconcile_republishes_a_displaced_intent(
    o: vocabulary.Observed, actions: list[str], warning: str | None
) -> None:
    plan = decide.reconcile(o)
    assert kinds(plan) == actions
    warnings = [a.reason for a in plan.actions if isinstance(a, vocabulary.Event) and a.type == "Warning"]
    assert warnings == ([warning] if warning else [])
    for a in plan.actions:
        if isinstance(a, vocabulary.Publish):
            # Fenced on what is actually there, the generation the RKCP has now.
            assert a.expected_last_seq == (o.published.seq if o.published else 0)
            assert a.op == "provision" and a.spec == o.desired_spec


RECHECKS: list[tuple[str, Published | None, messages.Status | None, bool]] = [
    # id, the hub's record, the site's status, read the stream again? (however old the record:
    # a purge or an overwrite the site cannot see is found by the survey of the stream)
    ("record, site answered it", published(seq=10), status(seq=10), False),
    ("record, site behind", published(seq=10), status(seq=9), False),
    ("record, no status", published(seq=10), None, False),
    ("site answered a sequence the hub never published", published(seq=10), status(seq=12), True),
    ("no record, site answered an intent", None, status(seq=3), True),
    ("no record, no status", None, None, False),
]


@pytest.mark.parametrize(
    ("key_id", "signing_key_id", "deleting", "actions"),
    [c[1:] for c in RESIGN_CASES],
    ids=[c[0] for c in RESIGN_CASES],
)
def test_an_intent_signed_by_a_rotated_out_key_is_signed_again(
    key_id: str, signing_key_id: str, deleting: bool, actions: list[str]
) -> None:
    """After `keys generate --rotate-signing` the hub re-signs what is on the subjects, so retiring
    the old key (`keys retire`) leaves no intent the agents would refuse."""
    latest = Published(
        seq=5,
        op=Op.DELETE if deleting else Op.PROVISION,
        generation=1,
        owner_uid=UID,
        spec_digest=intents.spec_digest({} if deleting else SPEC),
        key_id=key_id,
    )
    o = observed(
        rkcp_obj(deleting=deleting),
        published=latest,
        signing_key_id=signing_key_id,
        report=vocabulary.SiteReport(status=status("Ready", seq=5)),
    )
    plan = decide.reconcile(o)
    assert [k for k in kinds(plan) if k == "Publish"] == actions
    for action in plan.actions:
        if isinstance(action, vocabulary.Publish):
            assert (action.op, action.expected_last_seq) == (latest.op, 5)


@pytest.mark.parametrize(("held", "site", "again"), [x[1:] for x in RECHECKS], ids=[x[0] for x in RECHECKS])
def test_recheck_published(held: Published | None, site: messages.Status | None, again: bool) -> None:
    assert intents.recheck_published(held, site) is again


# The site reports the TCP Deleted while the hub still wants it.
VANISHED: list[tuple[str, vocabulary.Observed, list[str], str | None, tuple[str, str]]] = [
    # id, observed, actions (events aside), Warning event reason, TenantControlPlaneReady
    (
        "Deleted answers the latest provision: publish it again, Recreating",
        observed(
            report=vocabulary.SiteReport(status=status("Deleted", seq=5, reason="NotFound", endpoint=False))
        ),
        ["Publish"],
        "TenantControlPlaneVanished",
        ("False", "Recreating"),
    ),
    (
        "Deleted of an older intent: the newer one recreates it, Recreating",
        observed(
            report=vocabulary.SiteReport(status=status("Deleted", seq=4, reason="NotFound", endpoint=False))
        ),
        [],
        None,
        ("False", "Recreating"),
    ),
    (
        "Deleted of a previous owner: not ours, nothing",
        observed(
            report=vocabulary.SiteReport(status=status("Deleted", seq=5, owner="old-uid", endpoint=False))
        ),
        [],
        None,
        ("Unknown", "NoStatus"),
    ),
    (
        "Deleted while the subject holds another owner's intent: ours is published, not Recreating",
        observed(
            published=published(owner="old-uid"),
            report=vocabulary.SiteReport(status=status("Deleted", seq=5, endpoint=False)),
        ),
        ["Publish"],
        None,
        ("False", "Deleted"),
    ),
    (
        "paused Cluster: Recreating shown, nothing published",
        observed(
            cluster=cluster.Cluster.parse(
                {"metadata": {"name": "c", "annotations": {"cluster.x-k8s.io/paused": ""}}}
            ),
            report=vocabulary.SiteReport(status=status("Deleted", seq=5, endpoint=False)),
        ),
        [],
        None,
        ("False", "Recreating"),
    ),
]


@pytest.mark.parametrize(
    ("o", "actions", "warning", "tcp_ready"), [x[1:] for x in VANISHED], ids=[x[0] for x in VANISHED]
)
def test_a_tcp_deleted_at_the_site_is_not_accepted_while_wanted(
    o: vocabulary.Observed, actions: list[str], warning: str | None, tcp_ready: tuple[str, str]
) -> None:
    plan = decide.reconcile(o)
    assert kinds(plan) == actions
    warnings = [a.reason for a in plan.actions if isinstance(a, vocabulary.Event) and a.type == "Warning"]
    assert warnings == ([warning] if warning else [])
    assert cond(plan, "TenantControlPlaneReady") == tcp_ready
    assert cond(plan, "Ready")[0] == "False"
    for a in plan.actions:
        if isinstance(a, vocabulary.Publish):
            assert a.op == "provision" and a.expected_last_seq == (o.published.seq if o.published else 0)


# The site reports NotReady/Drifted while it reverts an edit of fields we own.
DRIFTED: list[tuple[str, messages.Status, tuple[str, str], bool]] = [
    # id, the site's status, TenantControlPlaneReady, status.ready
    ("drifted: not Ready, the reason says why", status("NotReady", reason="Drifted"), ("False", "Drifted"),
     False),
    ("reverted: Ready again", status("Ready", reason="Ready"), ("True", "Ready"), True),
    ("another NotReady keeps the phase as reason", status("NotReady", reason="WriteLimited"),
     ("False", "NotReady"), False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("site", "tcp_ready", "ready"), [x[1:] for x in DRIFTED], ids=[x[0] for x in DRIFTED]
)
def test_a_drifted_tcp_is_never_ready(site: messages.Status, tcp_ready: tuple[str, str], ready: bool) -> None:
    plan = decide.reconcile(observed(report=vocabulary.SiteReport(status=site)))
    assert cond(plan, "TenantControlPlaneReady") == tcp_ready
    assert plan.status is not None and plan.status.ready is ready
    if not ready:
        assert cond(plan, "Ready")[0] == "False"


def test_what_a_person_reads_holds_no_microseconds_and_no_generation_the_rkcp_outgrows() -> None:
    beat = NOW - dt.timedelta(minutes=5, microseconds=27042)
    plan = decide.reconcile(observed(site=SiteView(connected=False, last_heartbeat_time=beat)))
    assert plan.status is not None
    connected = c.get(plan.status.conditions, "SiteConnected")
    assert connected is not None and connected.message == "last heartbeat 2026-11-30T11:54:59Z"
    upgrade = decide.reconcile(observed(published=published(spec={**SPEC, "older": True})))
    events = [a for a in upgrade.actions if isinstance(a, vocabulary.Event)]
    (event,) = [e for e in events if e.reason == "IntentPublished"]
    # The hub's own write of the endpoint moves the generation on: an event naming it would lag.
    assert event.message == "provision intent sent to site site-a: Kubernetes v1.31.0, 2 replicas"


def test_a_creation_going_as_asked_records_no_event_a_change_of_what_runs_does() -> None:
    """Events are news: the first intent and the first Ready are in the conditions."""
    first = decide.reconcile(observed(published=None, report=vocabulary.SiteReport()))
    assert any(isinstance(a, vocabulary.Publish) for a in first.actions)
    ready = decide.reconcile(observed(rkcp_obj(), known_initialized=False))
    assert ready.first_ready
    for plan in (first, ready):
        assert [a for a in plan.actions if isinstance(a, vocabulary.Event)] == []
    changed = decide.reconcile(observed(published=published(spec={**SPEC, "older": True})))
    assert [a.reason for a in changed.actions if isinstance(a, vocabulary.Event)] == ["IntentPublished"]


@pytest.mark.parametrize(
    ("endpoint_set", "generation"),
    [(False, 2), (True, 1)],
    ids=["the-endpoint-written-by-this-plan", "the-endpoint-already-there"],
)
def test_the_status_is_for_the_generation_the_plans_own_endpoint_write_makes(
    endpoint_set: bool, generation: int
) -> None:
    """Written with the generation as read, the endpoint's own watch event would bring a second
    status write moving nothing but observedGeneration (in the status and every condition)."""
    r = rkcp_obj()
    if endpoint_set:
        r.spec.control_plane_endpoint = cluster.Endpoint(host="10.0.0.1", port=6443)
    plan = decide.reconcile(observed(r, report=vocabulary.SiteReport(status=status())))
    assert plan.status is not None
    assert plan.status.observed_generation == generation
    assert {cond.observed_generation for cond in plan.status.conditions} == {generation}
