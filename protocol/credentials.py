"""A site's NATS credentials in operator mode: what the hub mints and how an agent asks for it.

    <prefix>.bootstrap.<site>    agent → hub, once, with the bootstrap credential
    <prefix>.renew.<site>        agent → hub, with its current (still valid) credential

Both are NATS request/reply (core NATS, no stream keeps them). The request names the agent's own
user NKey and proves that the agent holds its seed (``proof``: the key's signature over the
request's other fields), so a JWT is only ever minted for the key of whoever asks, and the seed
never leaves the site. The server lets a bootstrap credential publish only its site's bootstrap
subject and a site only its own renew subject: the site in the subject is the server's word, and
a request naming another site is refused (``check``).

A bootstrap request carries the bootstrap JWT it came with, so that the hub can revoke it once
used (single use); a renewal carries the JWT being renewed.

The claims the hub signs (``site_user``, ``bootstrap_user``, ``hub_user``) are built here from
``protocol.permissions``, so one place says what each identity may do. Pure.
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Final

import msgspec
import nacl.exceptions
import nacl.signing

from protocol import errors, labels, natsjwt, permissions, streams, subjects

SCHEMA: Final = "kamaji-broker.io/credential-request/v1"
DEFAULT_LIFETIME: Final = dt.timedelta(hours=24)
DEFAULT_BOOTSTRAP_LIFETIME: Final = dt.timedelta(hours=1)
DEFAULT_OBSERVER_LIFETIME: Final = DEFAULT_LIFETIME
"""``kamaji-broker status``'s read-only user, like the hub's own: a copy left on a laptop or in a
CI secret stops working within a day unless signed again (``kamaji-broker observer issue``)."""
MAX_REQUEST_AGE: Final = dt.timedelta(minutes=5)
"""How old (or how far in the future, for clock skew) a request may be: a captured request cannot
be replayed later for a fresh JWT of a key whose holder may since have been revoked."""
MAX_SUBSCRIPTIONS: Final = 1000
"""Subscriptions one site's connection may hold (an agent needs a handful: its inbox, its pull
requests); a bound the server enforces, so a compromised agent cannot swell the server's
interest graph. The hub's has none: it holds one per site (its consumer of the site's stream),
and a server that refuses one more closes the whole connection."""


Kind = subjects.Service


class Request(msgspec.Struct, kw_only=True, frozen=True):
    schema: str = SCHEMA
    kind: Kind
    site: str
    public_key: str
    issued_at: dt.datetime
    credential: str
    """The JWT the request comes with: the bootstrap credential's, or the one being renewed."""
    proof: str = ""


class Reply(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    jwt: str = ""
    error: str = ""


def _signed_bytes(request: Request) -> bytes:
    return msgspec.json.encode(msgspec.structs.replace(request, proof=""), order="sorted")


def request(
    kind: Kind, site: str, seed: bytes, *, credential: str, now: dt.datetime | None = None
) -> Request:
    """A request for a JWT for the user key of ``seed``, signed by it."""
    unsigned = Request(
        kind=kind,
        site=labels.check(site, field="site"),
        public_key=natsjwt.public_of(seed),
        issued_at=now or dt.datetime.now(dt.UTC),
        credential=credential,
    )
    proof = natsjwt.key_pair(seed).sign(_signed_bytes(unsigned))
    return msgspec.structs.replace(unsigned, proof=base64.urlsafe_b64encode(proof).decode("ascii"))


def decode(data: bytes) -> Request:
    try:
        return msgspec.json.decode(data, type=Request)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise errors.DecodeError(f"credential request: {exc}") from None


def check(req: Request, *, kind: Kind, site: str, now: dt.datetime) -> None:
    """Refuse (CredentialError naming why) a request that is not of ``kind``, names another site
    than the subject's, is stale, or is not signed by the key it names."""
    if req.schema != SCHEMA:
        raise errors.CredentialError(f"credential request: schema {req.schema!r}, expected {SCHEMA!r}")
    if req.kind is not kind:
        raise errors.CredentialError(f"a {req.kind.value} request on the {kind.value} subject")
    if req.site != site:
        raise errors.CredentialError(f"request for site {req.site!r} on site {site!r}'s subject")
    age = now - req.issued_at
    if abs(age) > MAX_REQUEST_AGE:
        raise errors.CredentialError(
            f"request issued at {req.issued_at.isoformat()}, {age.total_seconds():.0f}s from now "
            f"(at most {MAX_REQUEST_AGE.total_seconds():.0f}s): a replay, or the site's clock is off"
        )
    try:
        raw = natsjwt.public_key(req.public_key, "user")
        proof = base64.urlsafe_b64decode(req.proof.encode("ascii"))
        nacl.signing.VerifyKey(raw).verify(_signed_bytes(req), proof)
    except (errors.JWTError, ValueError, nacl.exceptions.BadSignatureError):
        raise errors.CredentialError(
            f"request's proof does not verify with its key {req.public_key[:12]}...: "
            "a JWT is minted only for the key of the one who asks"
        ) from None


def _user(
    name: str,
    user_key: str,
    perms: permissions.Permissions,
    *,
    account: str,
    now: dt.datetime,
    lifetime: dt.timedelta,
    subs: int = MAX_SUBSCRIPTIONS,
) -> natsjwt.Claims:
    iat = int(now.timestamp())
    if lifetime.total_seconds() < 1:  # every user we mint expires: none is valid forever
        raise ValueError(f"credential {name}: a lifetime of at least a second, not {lifetime}")
    return natsjwt.Claims(
        sub=user_key,
        iss="",
        iat=iat,
        exp=iat + int(lifetime.total_seconds()),
        name=name,
        nats=natsjwt.User(
            pub=natsjwt.Allow(perms.publish),
            sub=natsjwt.Allow(perms.subscribe),
            resp=natsjwt.Responses(max=1, ttl=int(5e9)) if perms.reply_to_requests else None,
            subs=subs,
            payload=streams.MAX_PAYLOAD,
            issuer_account=account,
        ),
    )


def site_user(
    site: str,
    user_key: str,
    *,
    account: str,
    now: dt.datetime,
    lifetime: dt.timedelta = DEFAULT_LIFETIME,
    prefix: str = subjects.DEFAULT_PREFIX,
) -> natsjwt.Claims:
    """The claims of a site's agent: exactly ``permissions.for_site``, for ``lifetime``."""
    perms = permissions.for_site(site, prefix=prefix)
    return _user(f"site:{site}", user_key, perms, account=account, now=now, lifetime=lifetime)


def bootstrap_user(
    site: str,
    user_key: str,
    *,
    account: str,
    now: dt.datetime,
    lifetime: dt.timedelta = DEFAULT_BOOTSTRAP_LIFETIME,
    prefix: str = subjects.DEFAULT_PREFIX,
) -> natsjwt.Claims:
    perms = permissions.for_bootstrap(site, prefix=prefix)
    return _user(f"bootstrap:{site}", user_key, perms, account=account, now=now, lifetime=lifetime)


def hub_user(
    user_key: str,
    *,
    account: str,
    now: dt.datetime,
    lifetime: dt.timedelta = DEFAULT_LIFETIME,
    prefix: str = subjects.DEFAULT_PREFIX,
) -> natsjwt.Claims:
    perms = permissions.for_hub(prefix=prefix)
    return _user("hub", user_key, perms, account=account, now=now, lifetime=lifetime, subs=natsjwt.NO_LIMIT)


def site_named(claims: natsjwt.Claims, *, role: str) -> str:
    """The site a JWT we minted is for (its name, ``site:<site>`` or ``bootstrap:<site>``)."""
    head, _, site = claims.name.partition(":")
    if head != role or not site:
        raise errors.CredentialError(f"JWT {claims.name!r} is not a {role} credential")
    return labels.check(site, field="site")


def observer_user(
    user_key: str,
    *,
    account: str,
    now: dt.datetime,
    lifetime: dt.timedelta = DEFAULT_OBSERVER_LIFETIME,
    prefix: str = subjects.DEFAULT_PREFIX,
) -> natsjwt.Claims:
    """The claims of ``kamaji-broker status``'s read-only user: exactly ``permissions.for_observer``."""
    perms = permissions.for_observer(prefix=prefix)
    return _user("observer", user_key, perms, account=account, now=now, lifetime=lifetime)
