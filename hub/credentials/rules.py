"""Whether the hub mints a site's NATS credential for a request, and what it revokes then. Pure.

A request reaches the hub on ``<prefix>.bootstrap.<site>`` or ``<prefix>.renew.<site>``; the
server let the sender publish there only with that site's bootstrap credential or that site's
own credential, so ``site`` (from the subject) is the server's word. ``protocol.credentials.
check`` has already proven that the sender holds the seed of the key it names. What is left,
``judge``:

- the JWT the request comes with is one this hub minted (the account's signing key issued it,
  for this account) for this site and role (``bootstrap:<site>``, ``site:<site>``), unexpired;
- the site has a ``Site`` in the management cluster that is not being deleted;
- no credential is minted again for a key the hub revoked (a deleted Site's agent, a replaced
  key, a used bootstrap), nor on a revoked bootstrap credential whose revocation has not reached
  the servers yet;
- a renewal renews its own key, and that key is still the site's (a site that bootstrapped
  again has a new key: the old one is revoked, and may not renew);
- a bootstrap credential is used once, and only in the life of the Site it was made for: one
  made before the Site was created belongs to an earlier Site of that name (deleting a Site ends
  what was minted for it), unless the Site names it as the one it was made with (``kamaji-broker
  site add`` writes the bootstrap credential and the Site's manifest together, before the Site
  exists).

A bootstrap that succeeds revokes its bootstrap credential, and the site's previous key if it
had another (an agent that lost its Secret starts again with a new key and a new bootstrap). A
bootstrap credential refused because its time is past (made before the site's recorded
credential, or before the Site) is revoked at once: it may be a copy nobody used.

"Never again" lasts as long as the hub keeps the revocation, at least the longest lifetime of
anything it mints: by then every JWT of the key has expired, and a key can get a JWT again only
with a bootstrap credential of the Site's current life, which is what an operator hands over
to let an agent in.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from protocol import credentials, errors, natsjwt


@dataclass(frozen=True)
class SiteRecord:
    """What the management cluster says of the site."""

    exists: bool
    """A ``Site`` object that is not being deleted."""
    key: str = ""
    """The user key its credential was last minted for (``status.credential.publicKey``)."""
    issued_at: int = 0
    """When that credential was minted (unix seconds; 0: never): a bootstrap credential made
    before it is spent, whatever the hub remembers (single use across restarts)."""
    created_at: int = 0
    """When the Site object was created (unix seconds; 0: unknown): its current life began
    then, and a bootstrap credential made before belongs to an earlier one."""
    bootstrap: str = ""
    """The key of the bootstrap credential the Site says it was made with (``site add`` writes
    both before the Site exists): it may be older than the Site."""


@dataclass(frozen=True)
class Verdict:
    reason: str = ""
    """Why the request is refused; empty when it is granted."""
    revoke: tuple[str, ...] = ()
    """User keys to revoke once the answer is sent (a refusal too may end what it was shown)."""

    @property
    def granted(self) -> bool:
        return not self.reason


@dataclass(frozen=True)
class Issuer:
    """Who mints: the account, its signing keys (the hub's, and during a rotation the one
    rotated out, whose JWTs are renewed), and how long the hub remembers a revocation: a
    bootstrap credential valid longer could outlive the revocation of its use."""

    account: str
    signing_keys: tuple[str, ...]
    keep_for_seconds: int


def minted_here(presented: natsjwt.Claims, issuer: Issuer) -> bool:
    return (
        isinstance(presented.nats, natsjwt.User)
        and presented.iss in issuer.signing_keys
        and presented.nats.issuer_account == issuer.account
    )


def bootstrap_of(token: str, *, site: str) -> natsjwt.Claims | None:
    """The claims of ``token`` if it is a bootstrap credential of ``site`` (expired or not; its
    signature checked against the issuer it names, which ``minted_here`` judges); else None."""
    try:
        claims = natsjwt.decode(token, now=0)
        return claims if credentials.site_named(claims, role="bootstrap") == site else None
    except (errors.JWTError, errors.CredentialError, errors.SubjectError):
        return None


def _role(kind: credentials.Kind) -> str:
    return "bootstrap" if kind is credentials.Kind.BOOTSTRAP else "site"


def judge(
    req: credentials.Request,
    presented: natsjwt.Claims,
    *,
    site: str,
    issuer: Issuer,
    record: SiteRecord,
    used_bootstraps: Mapping[str, str] | None = None,
    revoked: Collection[str] = (),
) -> Verdict:
    """Grant or refuse (with the reason, naming what is wrong) ``req`` for ``site``; ``revoked``:
    the user keys the hub holds as revoked."""
    role = _role(req.kind)
    if not minted_here(presented, issuer):
        return Verdict(
            f"the credential the request comes with was not minted by this hub (issuer {presented.iss})"
        )
    try:
        named = credentials.site_named(presented, role=role)
    except errors.CredentialError as exc:
        return Verdict(str(exc))
    except errors.SubjectError:
        return Verdict("the credential the request comes with names no valid site")
    if named != site:
        return Verdict(f"the credential the request comes with is site {named!r}'s, not {site!r}'s")
    if not record.exists:
        return Verdict(
            f"no Site {site!r} in the management cluster (or it is being deleted): "
            "no credential is minted for it"
        )
    past = _past(req, presented, site=site, record=record, revoked=revoked)
    if past is not None:
        return past
    if req.kind is credentials.Kind.RENEW:
        if presented.sub != req.public_key:
            return Verdict(
                f"a renewal renews the key it connected with ({presented.sub}), not {req.public_key}"
            )
        if record.key and record.key != req.public_key:
            return Verdict(
                f"key {req.public_key} is no longer site {site!r}'s (its key is {record.key}): "
                "bootstrap the site again"
            )
        return Verdict()
    return _bootstrap(req, presented, site=site, issuer=issuer, record=record, used=used_bootstraps or {})


def _past(
    req: credentials.Request,
    presented: natsjwt.Claims,
    *,
    site: str,
    record: SiteRecord,
    revoked: Collection[str],
) -> Verdict | None:
    """A refusal for good: a bootstrap credential of an earlier life of the Site (revoked now:
    it may be a copy nobody used), a revoked key or credential; None otherwise."""
    if req.kind is credentials.Kind.BOOTSTRAP and _of_an_earlier_life(presented, record):
        return Verdict(
            f"bootstrap credential {presented.sub} was made at {_iso(presented.iat)}, before Site "
            f"{site!r} was created at {_iso(record.created_at)}: it was made for an earlier Site of "
            "that name (make a new one: `kamaji-broker site add`, or the Site's bootstrap Secret)",
            revoke=(presented.sub,),
        )
    if req.public_key in revoked:
        return Verdict(
            f"key {req.public_key} was revoked (its Site was deleted, or the site bootstrapped with "
            "another key): no credential is minted for it again; delete the agent's identity Secret "
            "at the site so that it makes a new key, and give it a new bootstrap credential"
        )
    if presented.sub in revoked:
        return Verdict(f"the credential the request comes with ({presented.sub}) was revoked")
    return None


def _bootstrap(
    req: credentials.Request,
    presented: natsjwt.Claims,
    *,
    site: str,
    issuer: Issuer,
    record: SiteRecord,
    used: Mapping[str, str],
) -> Verdict:
    """A bootstrap is used once, for one key: asked again for the key it was used for (its
    answer was lost), it is granted again and revokes nothing more."""
    if presented.exp - presented.iat > issuer.keep_for_seconds or not presented.exp:
        return Verdict(
            f"bootstrap credential {presented.sub} is valid for longer than the hub keeps revocations "
            f"({issuer.keep_for_seconds}s): make one with a shorter --bootstrap-lifetime"
        )
    again = req.public_key == record.key
    spent_here = presented.sub in used and used[presented.sub] != req.public_key
    spent_before = bool(record.issued_at) and presented.iat < record.issued_at and not again
    if spent_here or spent_before:
        # One made before the site's credential is spent whoever used it, and revoked now: it
        # may be a copy nobody used. One used in this term is revoked at the end of its grace.
        return Verdict(
            f"bootstrap credential {presented.sub} was used already: a bootstrap credential is "
            "single-use (make a new one: `kamaji-broker site add`, or the Site's bootstrap Secret)",
            revoke=() if spent_here else (presented.sub,),
        )
    replaced = (record.key,) if record.key and not again else ()
    return Verdict(revoke=(presented.sub, *replaced))


def _of_an_earlier_life(presented: natsjwt.Claims, record: SiteRecord) -> bool:
    """Made before the Site was created, and not the one the Site names as made with it."""
    return bool(record.created_at) and presented.iat < record.created_at and presented.sub != record.bootstrap


def _iso(unix: int) -> str:
    return dt.datetime.fromtimestamp(unix, dt.UTC).isoformat().replace("+00:00", "Z")
