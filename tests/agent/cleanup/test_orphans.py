"""agent.cleanup.orphans: drift and orphan decisions, as tables."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from agent.cleanup import orphans
from agent.tcp import legacy, managed
from tests import helpers
from tests.agent import applying

SITE = "site-a"
SEQ = 10
T = 1000.0
GRACE = 60.0
UID = "tcp-uid-1"
KEY: orphans.Key = ("tenants", "cp1", UID)


def tcp(
    *,
    seq: int = SEQ,
    uid: str = UID,
    owner: str = "8d1c-uid",
    deleting: bool = False,
    site: str = SITE,
    version: str = "v1.31.0",
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    obj = applying.applied(managed.desired(helpers.intent(), seq=seq))
    obj["metadata"].update(uid=uid, resourceVersion="42")
    obj["metadata"]["labels"][managed.SITE] = site
    obj["metadata"]["annotations"][managed.OWNER_UID] = owner
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-11-30T12:00:00Z"
    spec = msgspec.json.decode(msgspec.json.encode(obj["spec"]))
    spec["kubernetes"]["version"] = version
    spec.update(extra or {})  # fields Kamaji defaults, which we never set
    obj["spec"] = spec
    return obj


def latest(*, seq: int = SEQ, op: str = "provision", uid: str = "8d1c-uid") -> orphans.Latest:
    i = helpers.intent(op=op, spec={}) if op == "delete" else helpers.intent()
    i = msgspec.structs.replace(i, owner=msgspec.structs.replace(i.owner, uid=uid))
    return orphans.Latest(intent=i, seq=seq)


def clocks(since: float | None = None, *, reported: bool = False) -> orphans.Clocks:
    return orphans.Clocks(
        since={} if since is None else {KEY: since},
        reported=frozenset({KEY}) if reported else frozenset(),
    )


def plan(
    item: orphans.Observed,
    *,
    caught_up: bool = True,
    state: orphans.Clocks | None = None,
    now: float = T,
    policy: orphans.Policy = "delete",
) -> orphans.Plan:
    return orphans.decide(
        [item],
        site=SITE,
        caught_up=caught_up,
        clocks=state or orphans.Clocks(),
        now=now,
        grace=GRACE,
        policy=policy,
    )


LATE = T + GRACE + 1

CASES: list[tuple[str, orphans.Observed, dict[str, Any], list[type], dict[orphans.Key, float], bool]] = [
    # id, observed, decide kwargs, action types, next orphan clock, reported afterwards
    ("in sync: nothing", orphans.Observed(tcp(), latest()), {}, [], {}, False),
    (
        "Kamaji's defaults are not drift",
        orphans.Observed(tcp(extra={"addons": {"coreDNS": {}}}), latest()),
        {},
        [],
        {},
        False,
    ),
    (
        "admin edited the version: reapply",
        orphans.Observed(tcp(version="v1.20.0"), latest()),
        {},
        [orphans.Reapply],
        {},
        False,
    ),
    (
        "drift while intents are pending: still reapply (the latest is the applied one)",
        orphans.Observed(tcp(version="v1.20.0"), latest()),
        {"caught_up": False},
        [orphans.Reapply],
        {},
        False,
    ),
    (
        "newer intent pending: the apply loop's, no revert",
        orphans.Observed(tcp(version="v1.20.0"), latest(seq=SEQ + 1)),
        {},
        [],
        {},
        False,
    ),
    (
        "older latest (stream recreated): not ours to judge",
        orphans.Observed(tcp(version="v1.20.0"), latest(seq=SEQ - 1)),
        {},
        [],
        {},
        False,
    ),
    (
        "latest is a delete: the apply loop's",
        orphans.Observed(tcp(version="v1.20.0"), latest(op="delete")),
        {},
        [],
        {},
        False,
    ),
    (
        "another owner's intent at the same seq: never reapplied",
        orphans.Observed(tcp(version="v1.20.0"), latest(uid="other")),
        {},
        [],
        {},
        False,
    ),
    (
        "drifted but being deleted: untouched",
        orphans.Observed(tcp(version="v1.20.0", deleting=True), latest()),
        {},
        [],
        {},
        False,
    ),
    (
        "unverifiable latest: untouched, not an orphan",
        orphans.Observed(tcp(version="v1.20.0"), orphans.Unverifiable("bad signature")),
        {"state": clocks(T - 10 * GRACE)},
        [],
        {},
        False,
    ),
    (
        "another site's TCP: ignored, not tracked",
        orphans.Observed(tcp(site="site-b"), None),
        {"state": clocks(T - 10 * GRACE)},
        [],
        {},
        False,
    ),
    ("first seen without intent: clock starts", orphans.Observed(tcp(), None), {}, [], {KEY: T}, False),
    (
        "within grace: wait",
        orphans.Observed(tcp(), None),
        {"state": clocks(T - GRACE)},
        [],
        {KEY: T - GRACE},
        False,
    ),
    (
        "past grace, caught up, policy delete",
        orphans.Observed(tcp(), None),
        {"state": clocks(T), "now": LATE},
        [orphans.DeleteOrphan],
        {KEY: T},
        False,
    ),
    (
        "past grace but intents pending: never",
        orphans.Observed(tcp(), None),
        {"state": clocks(T), "now": LATE, "caught_up": False},
        [],
        {KEY: T},
        False,
    ),
    (
        "past grace, being deleted: only the clock",
        orphans.Observed(tcp(deleting=True), None),
        {"state": clocks(T), "now": LATE},
        [],
        {KEY: T},
        False,
    ),
    (
        "past grace, policy report: reported once",
        orphans.Observed(tcp(), None),
        {"state": clocks(T), "now": LATE, "policy": "report"},
        [orphans.ReportOrphan],
        {KEY: T},
        True,
    ),
    (
        "already reported: not again",
        orphans.Observed(tcp(), None),
        {"state": clocks(T, reported=True), "now": LATE + 100, "policy": "report"},
        [],
        {KEY: T},
        True,
    ),
    (
        "reported, then pending intents: stays reported",
        orphans.Observed(tcp(), None),
        {"state": clocks(T, reported=True), "now": LATE, "policy": "report", "caught_up": False},
        [],
        {KEY: T},
        True,
    ),
    (
        "intent appears again: clock and report reset",
        orphans.Observed(tcp(), latest()),
        {"state": clocks(T, reported=True), "now": LATE, "policy": "report"},
        [],
        {},
        False,
    ),
    (
        "recreated under the same name (new uid): a fresh clock",
        orphans.Observed(tcp(uid="tcp-uid-2"), None),
        {"state": clocks(T - 10 * GRACE)},
        [],
        {("tenants", "cp1", "tcp-uid-2"): T},
        False,
    ),
]


@pytest.mark.parametrize(
    ("item", "kwargs", "kinds", "since", "reported"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_decide(
    item: orphans.Observed,
    kwargs: dict[str, Any],
    kinds: list[type],
    since: dict[orphans.Key, float],
    reported: bool,
) -> None:
    result = plan(item, **kwargs)
    assert [type(a) for a in result.actions] == kinds
    assert dict(result.clocks.since) == since
    assert (KEY in result.clocks.reported) == reported


def test_reapply_applies_every_field_we_own_with_a_resource_version_precondition() -> None:
    [action] = plan(orphans.Observed(tcp(version="v1.20.0"), latest())).actions
    assert isinstance(action, orphans.Reapply)
    assert (action.namespace, action.name, action.seq) == ("tenants", "cp1", SEQ)
    assert action.fields == ("kubernetes.version",)
    want = managed.desired(helpers.intent(), seq=SEQ)
    assert action.body["spec"] == want["spec"]
    assert action.body["metadata"] == {**want["metadata"], "resourceVersion": "42"}


def test_orphan_actions_name_the_object_and_why() -> None:
    [delete] = plan(orphans.Observed(tcp(), None), state=clocks(T), now=LATE).actions
    assert isinstance(delete, orphans.DeleteOrphan)
    assert (delete.namespace, delete.name, delete.uid) == ("tenants", "cp1", UID)
    assert "tenants/cp1" in delete.message and "61s" in delete.message and "deleting it" in delete.message
    [report] = plan(orphans.Observed(tcp(), None), state=clocks(T), now=LATE, policy="report").actions
    assert isinstance(report, orphans.ReportOrphan) and "orphan policy report" in report.message


def test_clocks_forget_tcps_that_are_gone_and_count_waiting_orphans() -> None:
    gone: orphans.Key = ("tenants", "gone", "uid-gone")
    state = orphans.Clocks(since={gone: T, KEY: T}, reported=frozenset({gone}))
    other = tcp(uid="uid-2")
    other["metadata"]["name"] = "cp2"
    result = orphans.decide(
        [orphans.Observed(tcp(), None), orphans.Observed(other, None)],
        site=SITE,
        caught_up=False,
        clocks=state,
        now=LATE,
        grace=GRACE,
        policy="delete",
    )
    assert result.actions == ()
    assert dict(result.clocks.since) == {KEY: T, ("tenants", "cp2", "uid-2"): LATE}
    assert result.clocks.reported == frozenset()
    assert result.waiting == 2


def test_grace_zero_still_needs_a_second_pass() -> None:
    first = orphans.decide(
        [orphans.Observed(tcp(), None)],
        site=SITE,
        caught_up=True,
        clocks=orphans.Clocks(),
        now=T,
        grace=0.0,
        policy="delete",
    )
    assert first.actions == ()
    second = orphans.decide(
        [orphans.Observed(tcp(), None)],
        site=SITE,
        caught_up=True,
        clocks=first.clocks,
        now=T + 0.5,
        grace=0.0,
        policy="delete",
    )
    assert [type(a) for a in second.actions] == [orphans.DeleteOrphan]


def vanished(*, seq: int = SEQ, owner: str = "8d1c-uid", generation: int = 1) -> managed.Applied:
    return managed.Applied(
        owner_uid=owner, intent_seq=seq, generation=generation, kubeconfig_key="admin.conf"
    )


RECREATE: list[tuple[str, orphans.Found, managed.Applied | None, int | None]] = [
    # id, latest on the subject, the vanished TCP's annotations, seq of the TCP to create (None: none)
    ("provision it ran: created again", latest(), vanished(), SEQ),
    ("newer provision of its owner: created at that seq", latest(seq=SEQ + 3), vanished(), SEQ + 3),
    ("delete intent: stays gone", latest(op="delete"), vanished(), None),
    ("another owner's intent: the apply loop's", latest(uid="new-owner"), vanished(), None),
    ("older seq than it ran: stays gone", latest(seq=SEQ - 1), vanished(), None),
    ("older generation than it ran: stays gone", latest(), vanished(generation=2), None),
    ("empty subject: stays gone", None, vanished(), None),
    ("unverifiable message: stays gone", orphans.Unverifiable("bad signature"), vanished(), None),
    ("annotations never seen: stays gone", latest(), None, None),
]


@pytest.mark.parametrize(("found", "gone", "seq"), [c[1:] for c in RECREATE], ids=[c[0] for c in RECREATE])
def test_recreate(found: orphans.Found, gone: managed.Applied | None, seq: int | None) -> None:
    body = orphans.recreate(found, gone)
    if seq is None:
        assert body is None
        return
    assert isinstance(found, orphans.Latest)
    assert body == managed.desired(found.intent, seq=seq)


def test_an_older_agents_tcp_is_adopted_by_an_apply() -> None:
    """Written by merge patch (no Apply of ours in its managedFields; the old ``applied-*``
    annotations are ignored): every field we own is reapplied, so the agent owns them."""
    obj = tcp()
    obj["metadata"]["managedFields"] = []
    obj["metadata"]["annotations"]["kamaji-broker.io/applied-hash"] = "x"
    [action] = plan(orphans.Observed(obj, latest())).actions
    assert isinstance(action, orphans.Reapply) and action.fields == (
        "controlPlane.deployment.replicas",
        "kubernetes.version",
    )
    assert "kamaji-broker.io/applied-hash" not in action.body["metadata"]["annotations"]
    # Once applied by us: nothing to do.
    assert plan(orphans.Observed(tcp(), latest())).actions == ()


def test_an_older_agents_fields_are_handed_over_then_applied_until_its_annotations_go() -> None:
    """Applied by us as it should be, but the older agent's Update still owns its fields and
    annotations: a Reapply that hands them over first; once handed over, the annotations still
    there (an apply that conflicted after the handover) are applied away without one."""
    obj = tcp()
    older = {
        "manager": "OpenAPI-Generator",
        "operation": "Update",
        "apiVersion": "kamaji.clastix.io/v1alpha1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{legacy.APPLIED_FIELDS}": {}}}},
    }
    obj["metadata"]["managedFields"] = [*obj["metadata"]["managedFields"], older]
    obj["metadata"]["annotations"][legacy.APPLIED_FIELDS] = "spec.kubernetes.version"
    [action] = plan(orphans.Observed(obj, latest())).actions
    assert isinstance(action, orphans.Reapply) and action.fields == ()
    assert action.handover == legacy.handover(obj) and action.handover is not None
    assert legacy.APPLIED_FIELDS not in action.body["metadata"]["annotations"]
    obj["metadata"]["managedFields"] = obj["metadata"]["managedFields"][:-1]
    [again] = plan(orphans.Observed(obj, latest())).actions
    assert isinstance(again, orphans.Reapply) and again.handover is None and again.fields == ()
    del obj["metadata"]["annotations"][legacy.APPLIED_FIELDS]
    assert plan(orphans.Observed(obj, latest())).actions == ()


def test_a_propagated_label_changed_at_the_site_is_put_back_and_others_are_left() -> None:
    """The periodic pass restores the RKCP's labels and annotations on the TCP (the
    spec is as applied: no field is reported), and leaves the labels somebody else set."""
    labelled = msgspec.structs.replace(helpers.intent(), labels={"team": "blue"})
    found = orphans.Latest(intent=labelled, seq=SEQ)
    obj = applying.applied(managed.desired(labelled, seq=SEQ))
    obj["metadata"].update(uid=UID, resourceVersion="42")
    assert plan(orphans.Observed(obj, found)).actions == ()
    obj["metadata"]["labels"].update(team="red", theirs="x")
    [action] = plan(orphans.Observed(obj, found)).actions
    assert isinstance(action, orphans.Reapply) and action.fields == ()
    assert action.body["metadata"]["labels"]["team"] == "blue"
    assert "theirs" not in action.body["metadata"]["labels"]
