"""hub.conditions: construction, transition times, lookups, summary, and the secrets backstop."""

from __future__ import annotations

import datetime as dt

import pydantic
import pytest

from hub import conditions as c

T0 = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(minutes=5)


def cond(
    type_: str, status: c.Status, reason: str = "R", message: str = "", *, at: dt.datetime = T0
) -> c.Condition:
    return c.new_condition(type_, status, reason, message, observed_generation=1, now=at)


# new_condition ------------------------------------------------------------------------------


def test_new_condition_wire_form() -> None:
    made = c.new_condition(
        "Available",
        c.TRUE,
        "AsExpected",
        "serving",
        observed_generation=3,
        now=T0 + dt.timedelta(microseconds=7),
    )
    assert made.to_dict() == {
        "type": "Available",
        "status": "True",
        "observedGeneration": 3,
        "lastTransitionTime": "2026-11-30T12:00:00Z",
        "reason": "AsExpected",
        "message": "serving",
    }


def test_round_trip_from_the_wire() -> None:
    wire = cond("SiteConnected", c.FALSE, "HeartbeatMissing", "no heartbeat for 40s").to_dict()
    assert c.Condition.model_validate(wire) == cond(
        "SiteConnected", c.FALSE, "HeartbeatMissing", "no heartbeat for 40s"
    )


def test_now_is_normalised_to_utc_seconds() -> None:
    local = dt.datetime(2026, 11, 30, 14, 0, 0, 999_999, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert cond("A", c.TRUE, at=local).last_transition_time == T0


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        cond("A", c.TRUE, at=dt.datetime(2026, 11, 30, 12, 0, 0))


@pytest.mark.parametrize(
    ("type_", "status", "reason"),
    [
        pytest.param("has space", c.TRUE, "R", id="type-with-space"),
        pytest.param("A", "Maybe", "R", id="status-not-in-enum"),
        pytest.param("A", c.TRUE, "", id="empty-reason"),
        pytest.param("A", c.TRUE, "not a reason", id="reason-with-spaces"),
        pytest.param("A", c.TRUE, "1Starts", id="reason-starting-with-digit"),
    ],
)
def test_invalid_conditions_are_refused(type_: str, status: str, reason: str) -> None:
    with pytest.raises(pydantic.ValidationError):
        c.new_condition(type_, status, reason, observed_generation=None, now=T0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("message", "redacted"),
    [
        pytest.param("TCP tenants/cp1 reports Ready", False, id="plain"),
        pytest.param("invalid token: signature mismatch", False, id="word-token-is-fine"),
        pytest.param("secret cp1-admin-kubeconfig not found", False, id="secret-name-is-fine"),
        pytest.param("-----BEGIN RSA PRIVATE KEY-----\nMIIE...", True, id="pem-key"),
        pytest.param("ca: -----BEGIN CERTIFICATE-----", True, id="pem-cert"),
        pytest.param("client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVkt", True, id="kubeconfig-key"),
        pytest.param("token: eyJhbGciOiJSUzI1NiIsImtpZCI6Ij", True, id="kubeconfig-token"),
        pytest.param("Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345", True, id="bearer"),
        pytest.param("seed SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU", True, id="nkey-seed"),
    ],
)
def test_secret_looking_messages_are_redacted(message: str, redacted: bool) -> None:
    got = cond("A", c.FALSE, message=message).message
    assert (got == c.REDACTED) is redacted
    assert got in (message, c.REDACTED)


def test_long_messages_are_truncated_to_the_api_limit() -> None:
    got = cond("A", c.FALSE, message="x" * (c.MAX_MESSAGE + 10)).message
    assert len(got) == c.MAX_MESSAGE
    assert got.endswith("...")


# set_condition ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "new", "expected_time"),
    [
        pytest.param([], cond("A", c.TRUE, at=T1), T1, id="new-type-gets-now"),
        pytest.param(
            [cond("A", c.TRUE)], cond("A", c.TRUE, "Other", "msg", at=T1), T0, id="same-status-keeps-time"
        ),
        pytest.param([cond("A", c.TRUE)], cond("A", c.FALSE, at=T1), T1, id="status-change-moves-time"),
        pytest.param([cond("A", c.UNKNOWN)], cond("A", c.TRUE, at=T1), T1, id="unknown-to-true-moves-time"),
        # The condition's own stamp does not matter: a transition happens at `now`.
        pytest.param([cond("A", c.TRUE)], cond("A", c.FALSE, at=T0), T1, id="transition-stamped-now"),
    ],
)
def test_set_condition_transition_time(
    before: list[c.Condition], new: c.Condition, expected_time: dt.datetime
) -> None:
    after = c.set_condition(before, new, now=T1)
    got = c.get(after, "A")
    assert got is not None
    assert got.last_transition_time == expected_time
    assert (got.status, got.reason, got.message) == (new.status, new.reason, new.message)


def test_set_condition_keeps_order_and_input() -> None:
    before = [cond("A", c.TRUE), cond("B", c.FALSE), cond("C", c.TRUE)]
    snapshot = list(before)
    after = c.set_condition(before, cond("B", c.TRUE, at=T1), now=T1)
    assert [x.type for x in after] == ["A", "B", "C"]
    assert before == snapshot
    appended = c.set_condition(after, cond("D", c.UNKNOWN), now=T1)
    assert [x.type for x in appended] == ["A", "B", "C", "D"]


def test_set_condition_is_idempotent() -> None:
    once = c.set_condition([], cond("A", c.TRUE, "Ok", "fine"), now=T0)
    twice = c.set_condition(once, cond("A", c.TRUE, "Ok", "fine", at=T1), now=T1)
    assert once == twice


# lookups ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conds", "expected"),
    [
        pytest.param([], None, id="absent"),
        pytest.param([cond("A", c.TRUE)], c.TRUE, id="true"),
        pytest.param([cond("A", c.FALSE)], c.FALSE, id="false"),
        pytest.param([cond("A", c.UNKNOWN)], c.UNKNOWN, id="unknown"),
        pytest.param([cond("B", c.TRUE)], None, id="other-type"),
    ],
)
def test_get(conds: list[c.Condition], expected: c.Status | None) -> None:
    found = c.get(conds, "A")
    assert (found.status if found is not None else None) == expected
    assert found is None or found.type == "A"


# summary ------------------------------------------------------------------------------------

OF = ("TenantControlPlaneReady", "SiteConnected", "Deleting")
NEGATIVE = ("Deleting",)


@pytest.mark.parametrize(
    ("conds", "status", "reason", "message"),
    [
        pytest.param(
            [
                cond("TenantControlPlaneReady", c.TRUE),
                cond("SiteConnected", c.TRUE),
                cond("Deleting", c.FALSE),
            ],
            c.TRUE,
            c.AS_EXPECTED,
            "",
            id="all-good",
        ),
        pytest.param(
            [
                cond("TenantControlPlaneReady", c.FALSE, "Provisioning", "pods starting"),
                cond("SiteConnected", c.TRUE),
                cond("Deleting", c.FALSE),
            ],
            c.FALSE,
            "Provisioning",
            "* TenantControlPlaneReady: pods starting",
            id="one-issue-keeps-its-reason",
        ),
        pytest.param(
            [
                cond("TenantControlPlaneReady", c.FALSE, "NotReady", "down"),
                cond("SiteConnected", c.FALSE, "HeartbeatMissing"),
                cond("Deleting", c.FALSE),
            ],
            c.FALSE,
            c.MULTIPLE_ISSUES,
            "* TenantControlPlaneReady: down\n* SiteConnected: HeartbeatMissing",
            id="several-issues",
        ),
        pytest.param(
            [
                cond("TenantControlPlaneReady", c.TRUE),
                cond("SiteConnected", c.TRUE),
                cond("Deleting", c.TRUE, "Deleting", "waiting for site"),
            ],
            c.FALSE,
            "Deleting",
            "* Deleting: waiting for site",
            id="negative-polarity-true-is-an-issue",
        ),
        pytest.param(
            [
                cond("TenantControlPlaneReady", c.UNKNOWN, "NoStatus", "no status yet"),
                cond("SiteConnected", c.FALSE, "Gone"),
            ],
            c.FALSE,
            "Gone",
            "* SiteConnected: Gone",
            id="issue-beats-unknown",
        ),
        pytest.param(
            [cond("TenantControlPlaneReady", c.TRUE), cond("SiteConnected", c.TRUE)],
            c.UNKNOWN,
            c.NOT_YET_REPORTED,
            "* Deleting: not yet reported",
            id="missing-is-unknown",
        ),
        pytest.param(
            [
                cond("TenantControlPlaneReady", c.UNKNOWN, "NoStatus", "no status yet"),
                cond("Deleting", c.FALSE),
            ],
            c.UNKNOWN,
            c.MULTIPLE_UNKNOWN,
            "* TenantControlPlaneReady: no status yet\n* SiteConnected: not yet reported",
            id="several-unknown",
        ),
    ],
)
def test_summary(conds: list[c.Condition], status: str, reason: str, message: str) -> None:
    got = c.summary(conds, "Ready", of=OF, negative=NEGATIVE, observed_generation=4, now=T1)
    assert (got.type, got.status, got.reason, got.message) == ("Ready", status, reason, message)
    assert got.observed_generation == 4
    assert got.last_transition_time == T1


def test_summary_through_set_condition_keeps_transition_time() -> None:
    good = [cond("TenantControlPlaneReady", c.TRUE), cond("SiteConnected", c.TRUE), cond("Deleting", c.FALSE)]
    first = c.set_condition(
        good, c.summary(good, "Ready", of=OF, negative=NEGATIVE, observed_generation=1, now=T0), now=T0
    )
    later = c.summary(first, "Ready", of=OF, negative=NEGATIVE, observed_generation=1, now=T1)
    again = c.set_condition(first, later, now=T1)
    assert again == first


def test_a_moment_in_a_message_is_utc_whole_seconds() -> None:
    east = dt.timezone(dt.timedelta(hours=2))
    when = dt.datetime(2026, 12, 4, 4, 57, 5, 27042, tzinfo=east)
    assert c.moment(when) == "2026-12-04T02:57:05Z"
    assert c.moment(None) == "never"
