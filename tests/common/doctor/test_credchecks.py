"""common.doctor.credchecks: a JWT's expiry by the /readyz rule, and its grants against the role's."""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest

from common.doctor import credchecks
from protocol import credentials, natsjwt, permissions

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
KEY = natsjwt.public_of(natsjwt.new_seed("user"))
ACCOUNT = natsjwt.public_of(natsjwt.new_seed("account"))


def site_a(*, issued: dt.datetime = NOW, hours: float = 24) -> natsjwt.Claims:
    return credentials.site_user(
        "site-a", KEY, account=ACCOUNT, now=issued, lifetime=dt.timedelta(hours=hours)
    )


@pytest.mark.parametrize(
    ("id_", "claims", "outcome", "detail"),
    [
        ("fresh", site_a(), "PASS", "JWT valid until 2026-12-02T12:00:00+00:00 (86400s left)"),
        (
            "a tenth left",
            site_a(issued=NOW - dt.timedelta(hours=22)),
            "WARN",
            "expiring soon: JWT valid until",
        ),
        (
            "expired",
            site_a(issued=NOW - dt.timedelta(hours=25)),
            "FAIL",
            "JWT expired at 2026-12-01T11:00:00+00:00",
        ),
    ],
)
def test_lifetime(id_: str, claims: natsjwt.Claims, outcome: str, detail: str) -> None:
    got = credchecks.lifetime(claims, now=NOW.timestamp(), where="--nats-creds a.creds", fix="mint one")
    assert got.outcome == outcome, id_
    assert got.detail.startswith(f"--nats-creds a.creds: site:site-a: {detail}")
    assert got.fix == {"PASS": "", "WARN": "renewal is overdue: mint one", "FAIL": "mint one"}[outcome]


def test_grants_exactly_the_role() -> None:
    got = credchecks.grants(site_a(), permissions.for_site("site-a"), role="site site-a", fix="f")
    assert (got.outcome, got.detail) == ("PASS", "exactly what site site-a needs (10 publish, 1 subscribe)")


HEARTBEAT_READ = f"publish {permissions.heartbeat_read('site-a')}"


@pytest.mark.parametrize(
    ("id_", "dropped", "added", "outcome"),
    [
        ("minted before the heartbeat read", (HEARTBEAT_READ,), (), "WARN"),
        ("and lacks another", (HEARTBEAT_READ, "publish kb.site.site-a"), (), "FAIL"),
        ("and grants more", (HEARTBEAT_READ,), ("kb.intent.>",), "FAIL"),
    ],
)
def test_grants_missing_only_what_doctor_reads_with(
    id_: str, dropped: tuple[str, ...], added: tuple[str, ...], outcome: str
) -> None:
    claims = site_a()
    assert isinstance(claims.nats, natsjwt.User)
    kept = tuple(g for g in claims.nats.pub.allow if f"publish {g}" not in dropped)
    user = msgspec.structs.replace(claims.nats, pub=natsjwt.Allow((*kept, *added)))
    got = credchecks.grants(
        msgspec.structs.replace(claims, nats=user),
        permissions.for_site("site-a"),
        role="site site-a",
        fix="mint a new .creds",
        doctor_only=(HEARTBEAT_READ,),
    )
    assert got.outcome == outcome, id_
    if outcome == "WARN":
        assert got.detail == f"site:site-a lacks what only doctor reads with: {HEARTBEAT_READ}"
        assert got.fix == "it works without; for doctor to read it too, mint a new .creds"


def test_grants_diff_names_missing_and_extra() -> None:
    claims = site_a()
    assert isinstance(claims.nats, natsjwt.User)
    user = msgspec.structs.replace(
        claims.nats, pub=natsjwt.Allow((*claims.nats.pub.allow[1:], "kb.intent.>")), resp=natsjwt.Responses()
    )
    missing, extra = credchecks.grant_diff(user, permissions.for_site("site-a"))
    assert missing == ("publish kb.status.site-a.*.*",)
    assert extra == ("publish kb.intent.>", "reply to requests")


def test_grants_of_another_role() -> None:
    got = credchecks.grants(site_a(), permissions.for_hub(), role="the hub", fix="f")
    assert got.outcome == "FAIL"
    assert got.detail.startswith(
        "site:site-a is not the hub's: missing: publish $JS.API.>; publish kb.intent.*.*.*;"
    )
    assert "| extra: publish $JS.ACK.KB_INTENTS.agent-site-a.*.*.*.*.*;" in got.detail


def bootstrap_a(*, issued: dt.datetime = NOW) -> natsjwt.Claims:
    return credentials.bootstrap_user(
        "site-a", KEY, account=ACCOUNT, now=issued, lifetime=dt.timedelta(hours=1)
    )


@pytest.mark.parametrize(
    ("id_", "issued", "outcome", "detail", "fix"),
    [
        ("fresh", NOW, "PASS", "JWT valid until 2026-12-01T13:00:00+00:00 (3600s left)", ""),
        ("a tenth left", NOW - dt.timedelta(minutes=55), "WARN", "expiring soon: JWT valid until",
         "start the process before it expires, or get one"),
        ("expired", NOW - dt.timedelta(hours=2), "FAIL", "JWT expired at 2026-12-01T11:00:00+00:00",
         "get one"),
    ],
)  # fmt: skip
def test_bootstrap(id_: str, issued: dt.datetime, outcome: str, detail: str, fix: str) -> None:
    got = credchecks.bootstrap(
        bootstrap_a(issued=issued), now=NOW.timestamp(), where="no identity", fix="get one"
    )
    assert (got.outcome, got.fix) == (outcome, fix), id_
    assert got.detail.startswith(f"no identity (bootstrap:site-a: {detail}"), got.detail
