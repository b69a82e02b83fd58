"""protocol.credentials: the request an agent signs, the checks on it, the claims the hub mints."""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest

from protocol import credentials, errors, natsjwt, permissions, subjects

NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)
SEED = natsjwt.new_seed("user")
B, R = credentials.Kind.BOOTSTRAP, credentials.Kind.RENEW


def _req() -> credentials.Request:
    return credentials.request(R, "site-a", SEED, credential="jwt", now=NOW)


def test_a_good_request_round_trips_and_checks() -> None:
    req = _req()
    back = credentials.decode(msgspec.json.encode(req))
    assert back == req
    credentials.check(back, kind=R, site="site-a", now=NOW + dt.timedelta(minutes=4))


@pytest.mark.parametrize(
    ("change", "kind", "site", "at", "mentions"),
    [
        ({}, B, "site-a", NOW, "a renew request on the bootstrap subject"),
        ({}, R, "site-b", NOW, "request for site 'site-a' on site 'site-b''s subject"),
        ({}, R, "site-a", NOW + dt.timedelta(minutes=6), "a replay"),
        ({}, R, "site-a", NOW - dt.timedelta(minutes=6), "a replay"),
        ({"schema": "other/v9"}, R, "site-a", NOW, "schema 'other/v9'"),
        ({"credential": "another"}, R, "site-a", NOW, "proof does not verify"),
        ({"proof": "!!"}, R, "site-a", NOW, "proof does not verify"),
        ({"public_key": "AXXX"}, R, "site-a", NOW, "proof does not verify"),
    ],
)
def test_refusals_name_what_is_wrong(
    change: dict[str, str], kind: credentials.Kind, site: str, at: dt.datetime, mentions: str
) -> None:
    req = msgspec.structs.replace(_req(), **change)
    with pytest.raises(errors.CredentialError, match=mentions.replace("(", r"\(")):
        credentials.check(req, kind=kind, site=site, now=at)


def test_undecodable_request() -> None:
    with pytest.raises(errors.DecodeError, match="credential request"):
        credentials.decode(b'{"kind": "steal"}')


def test_site_user_claims_are_for_site_permissions_exactly() -> None:
    key = natsjwt.public_of(SEED)
    claims = credentials.site_user("site-a", key, account="ACC", now=NOW)
    assert isinstance(claims.nats, natsjwt.User)
    perms = permissions.for_site("site-a")
    assert (claims.nats.pub.allow, claims.nats.sub.allow) == (perms.publish, perms.subscribe)
    assert claims.nats.resp is None and claims.nats.issuer_account == "ACC"
    assert claims.exp == int((NOW + credentials.DEFAULT_LIFETIME).timestamp())
    assert credentials.site_named(claims, role="site") == "site-a"
    with pytest.raises(errors.CredentialError, match="not a bootstrap credential"):
        credentials.site_named(claims, role="bootstrap")


def test_hub_user_may_answer_requests_and_bootstrap_may_only_ask() -> None:
    hub = credentials.hub_user("UKEY", account="ACC", now=NOW)
    assert isinstance(hub.nats, natsjwt.User) and hub.nats.resp is not None
    boot = credentials.bootstrap_user("site-a", "UKEY", account="ACC", now=NOW)
    assert isinstance(boot.nats, natsjwt.User)
    assert boot.nats.pub.allow == ("kb.bootstrap.site-a",)
    assert boot.exp - boot.iat == int(credentials.DEFAULT_BOOTSTRAP_LIFETIME.total_seconds())


def test_a_sites_subscriptions_are_bounded_and_the_hubs_grow_with_the_sites() -> None:
    site = credentials.site_user("site-a", "UKEY", account="ACC", now=NOW)
    hub = credentials.hub_user("UKEY", account="ACC", now=NOW)
    assert isinstance(site.nats, natsjwt.User) and isinstance(hub.nats, natsjwt.User)
    assert site.nats.subs == credentials.MAX_SUBSCRIPTIONS
    # One per site's stream: a bound on them would be a bound on the sites (1,000 reached it).
    assert hub.nats.subs == natsjwt.NO_LIMIT


@pytest.mark.parametrize(
    "subject", ["kb.bootstrap", "kb.bootstrap.a.b", "kb.renew.site-a", "kb.bootstrap.Site"]
)
def test_service_site_refuses_other_subjects(subject: str) -> None:
    with pytest.raises(errors.SubjectError):
        subjects.service_site(subjects.Service.BOOTSTRAP, subject)
