"""agent.apply.intents: every outcome of an intent, as a table."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from agent.apply import failures, intents
from agent.tcp import legacy
from agent.tcp import managed as tcps
from common.kube import errors as kerrors
from protocol import messages
from tests import helpers
from tests.agent import applying

CTX = intents.Context(site="site-a", namespaces=(), namespace_retry=60.0)
SEQ = 10


def observed(
    *,
    seq: int = SEQ,
    uid: str = "8d1c-uid",
    managed: bool = True,
    deleting: bool = False,
    generation: int = 1,
    **spec: Any,
) -> dict[str, Any]:
    obj = applying.applied(tcps.desired(helpers.intent(generation=generation), seq=seq))
    obj["metadata"]["uid"] = "tcp-uid-1"
    obj["metadata"]["annotations"][tcps.OWNER_UID] = uid
    if not managed:
        obj["metadata"]["labels"] = {}
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-11-30T12:00:00Z"
    obj["spec"] = {**obj["spec"], **spec}
    return obj


def delete_intent() -> messages.Intent:
    return helpers.intent(op="delete", spec={})


CASES: list[tuple[str, messages.Intent, int, dict[str, Any] | None, str, type | None, str | None, str]] = [
    # id, intent, seq, observed, result, action type, reported reason, settle
    ("create when absent", helpers.intent(), SEQ, None, "applied", intents.Create, None, "ack"),
    ("same intent again: no write", helpers.intent(), SEQ, observed(), "unchanged", None, None, "ack"),
    (
        "newer intent: apply",
        helpers.intent(generation=2),
        SEQ + 1,
        observed(),
        "applied",
        intents.Apply,
        None,
        "ack",
    ),
    (
        "drift at the same seq: apply",
        helpers.intent(),
        SEQ,
        observed(kubernetes={"version": "v1.20.0"}),
        "applied",
        intents.Apply,
        None,
        "ack",
    ),
    ("older seq: ignored", helpers.intent(), SEQ - 1, observed(), "stale", None, None, "ack"),
    (
        "another owner's TCP",
        helpers.intent(),
        SEQ + 1,
        observed(uid="other"),
        "conflict",
        None,
        "Conflict",
        "ack",
    ),
    (
        "unmanaged TCP",
        helpers.intent(),
        SEQ + 1,
        observed(managed=False),
        "conflict",
        None,
        "Conflict",
        "ack",
    ),
    (
        "being deleted: retry later",
        helpers.intent(),
        SEQ + 1,
        observed(deleting=True),
        "retry",
        None,
        None,
        "nak",
    ),
    ("wrong site", helpers.intent(site="site-b"), SEQ, None, "wrong_site", None, None, "term"),
    ("delete: absent is Deleted at once", delete_intent(), SEQ + 1, None, "deleted", None, "Deleted", "ack"),
    ("delete ours", delete_intent(), SEQ + 1, observed(), "deleted", intents.Delete, "Deleted", "ack"),
    (
        "delete of another owner: untouched",
        delete_intent(),
        SEQ + 1,
        observed(uid="newer-owner"),
        "stale",
        None,
        "Deleted",
        "ack",
    ),
    (
        "delete of an unmanaged TCP: untouched",
        delete_intent(),
        SEQ + 1,
        observed(managed=False),
        "stale",
        None,
        "Deleted",
        "ack",
    ),
    ("delete older than the applied seq", delete_intent(), SEQ - 1, observed(), "stale", None, None, "ack"),
    # A replay: an older, genuinely signed intent of the same owner, republished (higher seq).
    (
        "older generation at a higher seq: refused",
        helpers.intent(generation=3),
        SEQ + 1,
        observed(generation=4),
        "stale_generation",
        None,
        "StaleGeneration",
        "term",
    ),
    (
        "older generation of a TCP being deleted: refused, not retried",
        helpers.intent(generation=3),
        SEQ + 1,
        observed(generation=4, deleting=True),
        "stale_generation",
        None,
        "StaleGeneration",
        "term",
    ),
    (
        "same generation at a higher seq (the hub published again): apply",
        helpers.intent(generation=4),
        SEQ + 1,
        observed(generation=4),
        "applied",
        intents.Apply,
        None,
        "ack",
    ),
    (
        "older generation and older seq: a redelivery, ignored",
        helpers.intent(generation=3),
        SEQ - 1,
        observed(generation=4),
        "stale",
        None,
        None,
        "ack",
    ),
    (
        "older generation of another owner: a conflict, not a replay",
        helpers.intent(generation=3),
        SEQ + 1,
        observed(generation=4, uid="other"),
        "conflict",
        None,
        "Conflict",
        "ack",
    ),
    (
        "older delete of the same owner: refused, the TCP stays",
        helpers.intent(op="delete", spec={}, generation=3),
        SEQ + 1,
        observed(generation=4),
        "stale_generation",
        None,
        "StaleGeneration",
        "term",
    ),
    (
        "metadata naming our own key: rejected, the TCP left alone",
        msgspec.structs.replace(helpers.intent(generation=2), annotations={tcps.OWNER_UID: "u-other"}),
        SEQ + 1,
        observed(),
        "rejected",
        None,
        "InvalidMetadata",
        "ack",
    ),
    (
        "metadata Kubernetes would refuse: rejected before creating",
        msgspec.structs.replace(helpers.intent(), labels={"team": "not a value"}),
        SEQ,
        None,
        "rejected",
        None,
        "InvalidMetadata",
        "ack",
    ),
    (
        "a propagated label changed at the site, same seq: apply",
        msgspec.structs.replace(helpers.intent(), labels={"team": "blue"}),
        SEQ,
        observed(),
        "applied",
        intents.Apply,
        None,
        "ack",
    ),
    (
        "TCP without a generation annotation: applied",
        helpers.intent(generation=3),
        SEQ + 1,
        observed(generation=0),
        "applied",
        intents.Apply,
        None,
        "ack",
    ),
]


@pytest.mark.parametrize(
    ("intent", "seq", "obs", "result", "action", "reason", "settle"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_decide(
    intent: messages.Intent,
    seq: int,
    obs: dict[str, Any] | None,
    result: str,
    action: type | None,
    reason: str | None,
    settle: str,
) -> None:
    d = intents.decide(intent, seq, obs, ctx=CTX)
    assert d.result == result
    assert (type(d.action) if d.action else None) is action
    assert (d.report.reason if d.report else None) == reason
    assert d.settle == settle


def test_create_carries_labels_annotations_and_spec() -> None:
    intent = msgspec.structs.replace(helpers.intent(generation=4), kubeconfig_key="super.conf")
    d = intents.decide(intent, 42, None, ctx=CTX)
    assert isinstance(d.action, intents.Create)
    meta = d.action.body["metadata"]
    assert meta["labels"] == {tcps.MANAGED_BY: "kamaji-broker", tcps.SITE: "site-a"}
    assert meta["annotations"] == {
        tcps.OWNER_UID: "8d1c-uid",
        tcps.OWNER: "default/cp1",
        tcps.CLUSTER: "cp1",
        tcps.GENERATION: "4",
        tcps.INTENT_SEQ: "42",
        tcps.KUBECONFIG_KEY: "super.conf",
    }
    assert d.action.body["spec"] == intent.spec
    assert (meta["name"], meta["namespace"]) == ("cp1", "tenants")


def test_an_apply_names_the_uid_of_the_tcp_it_decided_on() -> None:
    d = intents.decide(helpers.intent(generation=5), SEQ + 1, observed(), ctx=CTX)
    assert isinstance(d.action, intents.Apply)
    assert d.action.body["metadata"]["uid"] == tcps.uid(observed()) != ""
    assert d.action.handover is None


def test_an_apply_to_a_tcp_an_older_agent_wrote_hands_it_over_first() -> None:
    obs = observed()
    older = {
        "manager": "OpenAPI-Generator",
        "operation": "Update",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{legacy.APPLIED_HASH}": {}}}},
    }
    obs["metadata"]["managedFields"] = [older]
    d = intents.decide(helpers.intent(generation=5), SEQ + 1, obs, ctx=CTX)
    assert isinstance(d.action, intents.Apply)
    assert d.action.handover == legacy.handover(obs) and d.action.handover is not None


def test_propagated_metadata_goes_beside_ours_and_names_what_is_refused() -> None:
    intent = msgspec.structs.replace(helpers.intent(), labels={"team": "blue"}, annotations={"note": "n"})
    d = intents.decide(intent, 42, None, ctx=CTX)
    assert isinstance(d.action, intents.Create)
    meta = d.action.body["metadata"]
    assert meta["labels"] == {"team": "blue", tcps.MANAGED_BY: "kamaji-broker", tcps.SITE: "site-a"}
    assert meta["annotations"]["note"] == "n" and meta["annotations"][tcps.OWNER_UID] == "8d1c-uid"
    refused = intents.decide(
        msgspec.structs.replace(intent, labels={tcps.SITE: "site-b"}), 43, observed(), ctx=CTX
    )
    assert refused.report is not None and refused.action is None
    assert refused.report.message == (
        "intent for TenantControlPlane tenants/cp1: label key 'kamaji-broker.io/site': "
        "the kamaji-broker.io/ keys are the agent's own record of the TCP and cannot be set"
    )


def test_stale_generation_names_both_generations_and_reports_the_applied_one() -> None:
    d = intents.decide(helpers.intent(generation=3), SEQ + 1, observed(generation=4), ctx=CTX)
    assert d.report is not None and d.action is None
    assert d.report.phase == "Rejected" and d.report.observed_generation == 4
    assert "generation 3" in d.report.message and "generation 4" in d.report.message
    assert "tenants/cp1" in d.report.message


def replacing(op: str = "provision", *replaced: str) -> messages.Intent:
    """An intent of a new owner that names earlier owners whose deletion the hub released."""
    spec = {} if op == "delete" else helpers.intent().spec
    intent = helpers.intent(op=op, spec=spec)
    owner = messages.Owner(uid="new-uid", namespace="default", name="cp1")
    return msgspec.structs.replace(intent, owner=owner, replaces=replaced)


REPLACE = [
    # id, intent, observed, result, action, settle
    ("provision naming the TCP's owner: delete it first", replacing("provision", "8d1c-uid"), observed(),
     "replacing", intents.Delete(uid="tcp-uid-1", replacing=True), "nak"),
    ("names it among others", replacing("provision", "zzz", "8d1c-uid"), observed(),
     "replacing", intents.Delete(uid="tcp-uid-1", replacing=True), "nak"),
    ("already being deleted: delete again, wait", replacing("provision", "8d1c-uid"), observed(deleting=True),
     "replacing", intents.Delete(uid="tcp-uid-1", replacing=True), "nak"),
    ("provision naming nobody: conflict", replacing("provision"), observed(), "conflict", None, "ack"),
    ("provision naming someone else: conflict", replacing("provision", "zzz"), observed(),
     "conflict", None, "ack"),
    ("names the TCP's owner, TCP unmanaged: conflict", replacing("provision", "8d1c-uid"),
     observed(managed=False), "conflict", None, "ack"),
    ("old owner's TCP gone: create", replacing("provision", "8d1c-uid"), None, "applied", None, "ack"),
    ("new owner's own TCP: the list changes nothing", replacing("provision", "8d1c-uid"),
     observed(uid="new-uid"), "applied", None, "ack"),
    ("delete naming the TCP's owner: it goes", replacing("delete", "8d1c-uid"), observed(),
     "deleted", intents.Delete(uid="tcp-uid-1"), "ack"),
    ("delete naming someone else: left alone", replacing("delete", "zzz"), observed(), "stale", None, "ack"),
]  # fmt: skip


@pytest.mark.parametrize(("intent", "obs", "result", "action", "settle"), [c[1:] for c in REPLACE],
                         ids=[c[0] for c in REPLACE])  # fmt: skip
def test_replacing_a_released_owner(
    intent: messages.Intent, obs: dict[str, Any] | None, result: str, action: Any, settle: str
) -> None:
    """Only an owner the signed intent names in ``replaces`` loses its TCP."""
    d = intents.decide(intent, SEQ + 1, obs, ctx=CTX)
    assert d.result == result and d.settle == settle
    if action is None:
        assert not isinstance(d.action, intents.Delete)
    else:
        assert d.action == action
    if result == "replacing":
        assert d.report is not None and d.report.reason == "ReplacingPreviousOwner"
        assert d.report.phase == "Provisioning" and "8d1c-uid" in d.report.message


def test_delete_is_fenced_by_uid_precondition() -> None:
    d = intents.decide(delete_intent(), SEQ + 1, observed(), ctx=CTX)
    assert d.action == intents.Delete(uid="tcp-uid-1")


OUTSIDE = [
    # id, intent, observed, result, (phase, reason)
    ("provision: refused", helpers.intent(), None, "rejected", ("Rejected", "NamespaceNotAllowed")),
    (
        "provision of an existing TCP: refused",
        helpers.intent(),
        observed(),
        "rejected",
        ("Rejected", "NamespaceNotAllowed"),
    ),
    # Nothing to delete means deleted: the agent never created a TCP there.
    ("delete: nothing there, deleted", delete_intent(), None, "deleted", ("Deleted", "Deleted")),
    ("delete: never touches what is there", delete_intent(), observed(), "deleted", ("Deleted", "Deleted")),
]


@pytest.mark.parametrize(
    ("intent", "found", "result", "reported"), [c[1:] for c in OUTSIDE], ids=[c[0] for c in OUTSIDE]
)
def test_namespace_outside_the_targets(
    intent: messages.Intent, found: dict[str, Any] | None, result: str, reported: tuple[str, str]
) -> None:
    ctx = intents.Context(site="site-a", namespaces=("other",), namespace_retry=60.0)
    d = intents.decide(intent, SEQ, found, ctx=ctx)
    assert d.result == result
    assert d.report is not None and (d.report.phase, d.report.reason) == reported
    assert d.action is None and d.settle == "ack"
    # Decided before any read: the agent's RBAC does not reach a namespace it does not serve.
    assert intents.decide_unobserved(intent, ctx=ctx) == d


def test_an_intent_for_a_served_namespace_needs_a_look_at_the_site() -> None:
    ctx = intents.Context(site="site-a", namespaces=(helpers.intent().namespace,), namespace_retry=60.0)
    assert intents.decide_unobserved(helpers.intent(), ctx=ctx) is None
    assert intents.decide_unobserved(helpers.intent(), ctx=CTX) is None


ERRORS = [
    (
        "422 Invalid",
        kerrors.Invalid(422, "Invalid", "spec.kubernetes.kubelet: Required value"),
        "rejected",
        "Invalid",
        "ack",
        None,
    ),
    (
        "namespace missing",
        kerrors.NotFound(404, "NotFound", 'namespaces "x" not found', {"kind": "namespaces"}),
        "rejected",
        "NamespaceNotFound",
        "nak",
        60.0,
    ),
    (
        "422 for another object's uid: raced, not invalid",
        kerrors.Invalid(
            422,
            "Invalid",
            'TenantControlPlane.kamaji.clastix.io "cp1" is invalid: metadata.uid: field is immutable',
            {"causes": [{"reason": "FieldValueInvalid", "field": "metadata.uid"}]},
        ),
        "retry",
        None,
        "nak",
        2.0,
    ),
    (
        "422 for another object's uid and what its validation says beside: raced",
        kerrors.Invalid(
            422,
            "Invalid",
            "[metadata.uid: field is immutable, spec.dataStoreSchema: Invalid value: forbidden]",
            {"causes": [{"field": "spec.dataStoreSchema"}, {"field": "metadata.uid"}]},
        ),
        "retry",
        None,
        "nak",
        2.0,
    ),
    ("API down", kerrors.Unavailable(0, "ClientConnectorError"), "retry", None, "nak", 2.0),
    ("create raced", kerrors.Conflict(409, "AlreadyExists"), "retry", None, "nak", 2.0),
    ("forbidden", kerrors.KubeError(403, "Forbidden"), "retry", None, "nak", 2.0),
    (
        "RBAC forbidden: the agent's grant may come back, retried",
        kerrors.KubeError(
            403,
            "Forbidden",
            'tenantcontrolplanes.kamaji.clastix.io "cp1" is forbidden: User "system:serviceaccount:x:agent" '
            'cannot patch resource "tenantcontrolplanes"',
        ),
        "retry",
        None,
        "nak",
        2.0,
    ),
    (
        "Kamaji's webhook denied it: reported, tried again slowly",
        kerrors.KubeError(
            403,
            "Forbidden",
            'admission webhook "vtenantcontrolplane.kb.io" denied the request: unable to downgrade a '
            "TenantControlPlane from 1.32.0 to 1.31.0",
        ),
        "rejected",
        "AdmissionDenied",
        "nak",
        60.0,
    ),
    (
        "a field the site's CRD lacks (an older Kamaji): reported, tried again slowly",
        kerrors.Unavailable(
            500,
            "InternalError",
            "failed to create typed patch object (tenants/cp1; kamaji.clastix.io/v1alpha1, "
            "Kind=TenantControlPlane): .spec.networkProfile.podCidrs: field not declared in schema",
        ),
        "rejected",
        "FieldNotDeclared",
        "nak",
        60.0,
    ),
    (
        "another 500: transient",
        kerrors.Unavailable(500, "InternalError", "etcdserver: leader changed"),
        "retry",
        None,
        "nak",
        2.0,
    ),
]


@pytest.mark.parametrize(
    ("error", "result", "reason", "settle", "delay"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS]
)
def test_after_error(
    error: kerrors.KubeError, result: str, reason: str | None, settle: str, delay: float | None
) -> None:
    d = failures.after_error(helpers.intent(), error, num_delivered=3, ctx=CTX)
    assert (d.result, d.settle, d.delay) == (result, settle, delay)
    assert (d.report.reason if d.report else None) == reason
    if reason == "Invalid":
        assert d.report is not None and "spec.kubernetes.kubelet" in d.report.message
    if reason in ("AdmissionDenied", "FieldNotDeclared"):
        assert d.report is not None and d.report.message == error.message, "the site's own words"
    if result == "retry":
        assert d.why == str(error), "the log says what refused"


@pytest.mark.parametrize(("delivered", "delay"), [(1, 0.5), (2, 1.0), (5, 8.0), (50, 60.0)])
def test_backoff(delivered: int, delay: float) -> None:
    assert failures.redelivery_delay(delivered) == delay


READ_FIRST: list[tuple[str, messages.Intent, bool | None, bool]] = [
    # id, intent, what the status loop's cache says (None: not complete yet), read first?
    ("provision the complete cache does not know: unread", helpers.intent(), False, False),
    ("provision the cache knows: read", helpers.intent(), True, True),
    ("provision before the cache is complete: read", helpers.intent(), None, True),
    ("delete the cache does not know: read (the uid fences it)", delete_intent(), False, True),
    ("delete the cache knows: read", delete_intent(), True, True),
    ("delete before the cache is complete: read", delete_intent(), None, True),
]


@pytest.mark.parametrize(
    ("intent", "known", "expected"), [c[1:] for c in READ_FIRST], ids=[c[0] for c in READ_FIRST]
)
def test_observes_first(intent: messages.Intent, known: bool | None, expected: bool) -> None:
    assert intents.observes_first(intent, known) is expected


EXISTS: list[tuple[str, kerrors.KubeError, bool]] = [
    # id, the create's error, read and decide again?
    (
        "AlreadyExists",
        kerrors.Conflict(409, "AlreadyExists", 'tenantcontrolplanes "cp1" already exists'),
        True,
    ),
    ("a 409 of another reason", kerrors.Conflict(409, "Conflict", "the object has been modified"), False),
    ("namespace missing", kerrors.NotFound(404, "NotFound", details={"kind": "namespaces"}), False),
    ("invalid", kerrors.Invalid(422, "Invalid", "spec.kubernetes.version: Required value"), False),
    ("API down", kerrors.Unavailable(0, "ClientConnectorError"), False),
    ("forbidden", kerrors.KubeError(403, "Forbidden"), False),
]


@pytest.mark.parametrize(("error", "expected"), [e[1:] for e in EXISTS], ids=[e[0] for e in EXISTS])
def test_exists_after_all(error: kerrors.KubeError, expected: bool) -> None:
    assert failures.exists_after_all(error) is expected
