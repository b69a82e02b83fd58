"""hub.credentials.rules.judge: who gets a site credential, by table."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import pytest

from hub.credentials import rules
from protocol import credentials, natsjwt

NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)
ACCOUNT = natsjwt.new_seed("account")
SIGNING = natsjwt.new_seed("account")
ROTATED = natsjwt.new_seed("account")
"""The account's signing key before a rotation: still trusted, its JWTs renewed."""
STRANGER = natsjwt.new_seed("account")
ISSUER = rules.Issuer(
    account=natsjwt.public_of(ACCOUNT),
    signing_keys=(natsjwt.public_of(SIGNING), natsjwt.public_of(ROTATED)),
    keep_for_seconds=86400,
)
AGENT = natsjwt.new_seed("user")
OTHER = natsjwt.new_seed("user")
BOOT = natsjwt.new_seed("user")


def _key(seed: bytes) -> str:
    return natsjwt.public_of(seed)


def _presented(
    role: str,
    site: str,
    holder: bytes,
    *,
    signer: bytes = SIGNING,
    account: str = "",
    at: dt.datetime = NOW,
    lifetime: dt.timedelta = dt.timedelta(hours=1),
) -> natsjwt.Claims:
    if role == "bootstrap":
        claims = credentials.bootstrap_user(
            site, _key(holder), account=account or ISSUER.account, now=at, lifetime=lifetime
        )
    else:
        claims = credentials.site_user(site, _key(holder), account=account or ISSUER.account, now=at)
    return natsjwt.decode(natsjwt.encode(claims, natsjwt.key_pair(signer)), now=NOW.timestamp())


@dataclass
class Case:
    kind: credentials.Kind
    presented: natsjwt.Claims
    record: rules.SiteRecord
    asker: bytes = AGENT
    used: dict[str, str] = field(default_factory=dict)
    revoked: set[str] = field(default_factory=set)
    reason: str = ""
    revoke: tuple[str, ...] = field(default_factory=tuple)


B, R = credentials.Kind.BOOTSTRAP, credentials.Kind.RENEW
HERE = rules.SiteRecord(exists=True)
NEW_LIFE = rules.SiteRecord(True, created_at=int(NOW.timestamp()) + 60)
"""A Site created (again) a minute after ``NOW``: bootstrap credentials made at ``NOW`` are older."""
LATER = rules.SiteRecord(True, _key(OTHER), issued_at=int(NOW.timestamp()) + 60)
CASES = {
    "a JWT signed by the rotated-out key is renewed": Case(
        R, _presented("site", "site-a", AGENT, signer=ROTATED), rules.SiteRecord(True, _key(AGENT))
    ),
    "a bootstrap valid longer than revocations are kept is refused": Case(
        B,
        _presented("bootstrap", "site-a", BOOT, lifetime=dt.timedelta(days=2)),
        HERE,
        reason="shorter --bootstrap-lifetime",
    ),
    "a bootstrap made before the site's current credential is spent (after a hub restart), and revoked": Case(
        B, _presented("bootstrap", "site-a", BOOT), LATER, reason="single-use", revoke=(_key(BOOT),)
    ),
    "a newer bootstrap after that is fine, and revokes the replaced key": Case(
        B,
        _presented("bootstrap", "site-a", BOOT, at=NOW + dt.timedelta(minutes=2)),
        LATER,
        revoke=(_key(BOOT), _key(OTHER)),
    ),
    "the same bootstrap asked again for the key it was used for (answer lost)": Case(
        B,
        _presented("bootstrap", "site-a", BOOT),
        LATER,
        asker=OTHER,
        used={_key(BOOT): _key(OTHER)},
        revoke=(_key(BOOT),),
    ),
    "bootstrap granted, revokes the bootstrap": Case(
        B, _presented("bootstrap", "site-a", BOOT), HERE, revoke=(_key(BOOT),)
    ),
    "bootstrap again with a new key revokes the old key too": Case(
        B,
        _presented("bootstrap", "site-a", BOOT),
        rules.SiteRecord(True, _key(OTHER)),
        revoke=(_key(BOOT), _key(OTHER)),
    ),
    "bootstrap again with the same key": Case(
        B, _presented("bootstrap", "site-a", BOOT), rules.SiteRecord(True, _key(AGENT)), revoke=(_key(BOOT),)
    ),
    "bootstrap used twice": Case(
        B, _presented("bootstrap", "site-a", BOOT), HERE, used={_key(BOOT): _key(OTHER)}, reason="single-use"
    ),
    "bootstrap for another site": Case(
        B, _presented("bootstrap", "site-b", BOOT), HERE, reason="site 'site-b''s, not 'site-a''s"
    ),
    "bootstrap with a site credential": Case(
        B, _presented("site", "site-a", AGENT), HERE, reason="is not a bootstrap credential"
    ),
    "bootstrap without a Site": Case(
        B, _presented("bootstrap", "site-a", BOOT), rules.SiteRecord(False), reason="no Site 'site-a'"
    ),
    "minted by a stranger's key": Case(
        B, _presented("bootstrap", "site-a", BOOT, signer=STRANGER), HERE, reason="not minted by this hub"
    ),
    "minted for another account": Case(
        B,
        _presented("bootstrap", "site-a", BOOT, account=_key(STRANGER)),
        HERE,
        reason="not minted by this hub",
    ),
    "a bootstrap made before the Site was created (an earlier Site's) is refused, revoked": Case(
        B, _presented("bootstrap", "site-a", BOOT), NEW_LIFE, reason="earlier Site", revoke=(_key(BOOT),)
    ),
    "even for a key that was revoked: its life is checked first, so it is revoked too": Case(
        B,
        _presented("bootstrap", "site-a", BOOT),
        NEW_LIFE,
        revoked={_key(AGENT)},
        reason="earlier Site",
        revoke=(_key(BOOT),),
    ),
    "the bootstrap the Site names as made with it may be older than the Site": Case(
        B,
        _presented("bootstrap", "site-a", BOOT),
        rules.SiteRecord(True, created_at=int(NOW.timestamp()) + 60, bootstrap=_key(BOOT)),
        revoke=(_key(BOOT),),
    ),
    "a bootstrap made in the Site's life is fine": Case(
        B,
        _presented("bootstrap", "site-a", BOOT, at=NOW + dt.timedelta(minutes=2)),
        NEW_LIFE,
        revoke=(_key(BOOT),),
    ),
    "a bootstrap for a revoked key is refused: the agent makes a new one": Case(
        B, _presented("bootstrap", "site-a", BOOT), HERE, revoked={_key(AGENT)}, reason="was revoked"
    ),
    "a bootstrap credential revoked (not yet on the servers) is refused": Case(
        B, _presented("bootstrap", "site-a", BOOT), HERE, revoked={_key(BOOT)}, reason="was revoked"
    ),
    "a renewal of a revoked key is refused (the revocation not yet on the servers)": Case(
        R,
        _presented("site", "site-a", AGENT),
        rules.SiteRecord(True, _key(AGENT)),
        revoked={_key(AGENT)},
        reason="was revoked",
    ),
    "renewal granted": Case(R, _presented("site", "site-a", AGENT), rules.SiteRecord(True, _key(AGENT))),
    "renewal when the status lost the key": Case(R, _presented("site", "site-a", AGENT), HERE),
    "renewal of another key": Case(
        R, _presented("site", "site-a", OTHER), HERE, reason="renews the key it connected with"
    ),
    "renewal of a replaced key": Case(
        R,
        _presented("site", "site-a", AGENT),
        rules.SiteRecord(True, _key(OTHER)),
        reason="no longer site 'site-a''s",
    ),
    "renewal by another site's credential": Case(
        R, _presented("site", "site-b", AGENT), HERE, reason="site 'site-b''s"
    ),
    "renewal with the bootstrap credential": Case(
        R, _presented("bootstrap", "site-a", AGENT), HERE, reason="is not a site credential"
    ),
    "renewal without a Site": Case(
        R, _presented("site", "site-a", AGENT), rules.SiteRecord(False), reason="being deleted"
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_judge(name: str) -> None:
    case = CASES[name]
    req = credentials.request(case.kind, "site-a", case.asker, credential="x", now=NOW)
    verdict = rules.judge(
        req,
        case.presented,
        site="site-a",
        issuer=ISSUER,
        record=case.record,
        used_bootstraps=case.used,
        revoked=case.revoked,
    )
    if case.reason:
        assert not verdict.granted and case.reason in verdict.reason
    else:
        assert verdict.granted, verdict.reason
    assert verdict.revoke == case.revoke


def test_bootstrap_of_names_only_a_bootstrap_credential_of_the_site() -> None:
    token = natsjwt.encode(
        credentials.bootstrap_user("site-a", _key(BOOT), account=ISSUER.account, now=NOW),
        natsjwt.key_pair(SIGNING),
    )
    claims = rules.bootstrap_of(token, site="site-a")
    assert claims is not None and claims.sub == _key(BOOT) and rules.minted_here(claims, ISSUER)
    assert rules.bootstrap_of(token, site="site-b") is None
    assert rules.bootstrap_of("not a jwt", site="site-a") is None
    site_jwt = natsjwt.encode(
        credentials.site_user("site-a", _key(AGENT), account=ISSUER.account, now=NOW),
        natsjwt.key_pair(SIGNING),
    )
    assert rules.bootstrap_of(site_jwt, site="site-a") is None
    forged = natsjwt.encode(
        credentials.bootstrap_user("site-a", _key(AGENT), account=ISSUER.account, now=NOW),
        natsjwt.key_pair(STRANGER),
    )
    stranger = rules.bootstrap_of(forged, site="site-a")
    assert stranger is not None and not rules.minted_here(stranger, ISSUER)
