"""fleet.wording: why a control plane is not Ready, in words, with ages. Tables, no I/O."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from fleet import wording

NOW = dt.datetime(2026, 12, 2, 8, 0, 0, tzinfo=dt.UTC)
BEAT = "2026-12-02T07:59:20.027042+00:00"  # 40 s before NOW, as the hub wrote it before whole seconds


def cond(status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"status": status, "reason": reason, "message": message}


GONE = cond("False", "HeartbeatMissing", f"last heartbeat {BEAT}")
SERVES = cond("True", "Available")
KAMAJI = "waiting for Kamaji at site site-a to provision the TenantControlPlane (Provisioning)"
QUIET = "no heartbeat from the site yet"
SEALED = "waiting for the sealed secrets"
OFFLINE = "site site-a is offline (last heartbeat 2026-12-02T07:58:00Z)"

WHY = [
    pytest.param({"Ready": cond("True", "AsExpected")}, "", id="ready"),
    pytest.param({}, "", id="no-ready-condition-from-an-older-hub"),
    pytest.param(
        {"Ready": cond("False", "Provisioning", "* TenantControlPlaneReady: Provisioning"),
         "Available": cond("False", "NotAvailable", KAMAJI)},
        KAMAJI,
        id="not-serving-says-why-as-available-does",
    ),
    pytest.param(
        {"Ready": cond("False", "HeartbeatMissing", f"* SiteConnected: last heartbeat {BEAT}"),
         "SiteConnected": GONE, "Available": SERVES},
        "site site-a not connected (last heartbeat 40s ago)",
        id="serving-its-site-gone",
    ),
    pytest.param(
        {"Ready": cond("Unknown", "NoHeartbeat", f"* SiteConnected: {QUIET}"),
         "SiteConnected": cond("Unknown", "NoHeartbeat", QUIET), "Available": SERVES},
        "site site-a has not connected yet (no heartbeat from its agent)",
        id="serving-its-site-not-heard-yet",
    ),
    pytest.param(
        {"Ready": cond("False", "MultipleIssuesReported",
                       f"* SiteConnected: last heartbeat {BEAT}\n* SecretsSynced: {SEALED}"),
         "SiteConnected": GONE, "SecretsSynced": cond("Unknown", "WaitingForSecrets"), "Available": SERVES},
        "site site-a not connected (last heartbeat 40s ago); waiting for the sealed secrets",
        id="several-culprits-one-line",
    ),
    pytest.param(
        {"Ready": cond("False", "MultipleIssuesReported",
                       "* TenantControlPlaneReady: NotReady\n* Paused: Paused"),
         "TenantControlPlaneReady": cond("False", "NotReady"), "Paused": cond("True", "Paused"),
         "Available": SERVES},
        "the TenantControlPlane at site site-a is NotReady; Paused",
        id="a-culprit-without-a-message-by-its-reason",
    ),
    pytest.param(
        {"Ready": cond("False", "Conflict", "the same TenantControlPlane is claimed by the older default/x")},
        "the same TenantControlPlane is claimed by the older default/x",
        id="not-a-summary",
    ),
    pytest.param(
        {"Ready": cond("False", "HeartbeatMissing", "* SiteConnected: ..."),
         "Available": cond("False", "NotAvailable", OFFLINE)},
        "site site-a is offline (last heartbeat 2m ago)",
        id="a-timestamp-in-available-is-an-age",
    ),
    pytest.param({"Ready": cond("False", "Paused")}, "Paused", id="a-reason-alone"),
]  # fmt: skip


@pytest.mark.parametrize(("conditions", "why"), WHY)
def test_why_not_ready(conditions: dict[str, dict[str, Any]], why: str) -> None:
    assert wording.why_not_ready(conditions, site="site-a", now=NOW) == why


AGES = [
    pytest.param(f"last heartbeat {BEAT}", "last heartbeat 40s ago", id="with-microseconds"),
    pytest.param("last seen 2026-12-02T06:00:00Z", "last seen 2h ago", id="zulu-hours"),
    pytest.param("seen 2026-12-02T08:00:05+00:00", "seen 0s ago", id="a-clock-ahead-is-now"),
    pytest.param("at 2026-12-02T07:00:00", "at 2026-12-02T07:00:00", id="no-zone-no-guess"),
    pytest.param("generation 2026", "generation 2026", id="not-a-timestamp"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "worded"), AGES)
def test_ages(text: str, worded: str) -> None:
    assert wording.ages(text, NOW) == worded
    assert wording.ages(text, None) == text
