"""Whether the hub mints a site's NATS credential for a request, and what it revokes then. Pure.

A request reaches the hub on ``<prefix>.bootstrap.<site>`` or ``<prefix>.renew.<site>``; the
server let the sender publish there only with that site's bootstrap credential or that site's
own credential, so ``site`` (from the subject) is the server's word. ``protocol.credentials.
check`` has already proven that the sender holds the seed of the key it names. What is left,
``judge``:

- the JWT the request comes with is one this hub minted (the account's signing key issued it,
  for this account) for this site and role (``bootstrap:<site>``, ``site:<site>``), unexpired;
- a renewal renews its own key, and that key is still the site's (a site that bootstrapped
  again has a new key: the old one is revoked, and may not renew);
- a bootstrap credential is used once;
- the site has a ``Site`` in the management cluster that is not being deleted.

A bootstrap that succeeds revokes its bootstrap credential, and the site's previous key if it
had another (an agent that lost its Secret starts again with a new key and a new bootstrap).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from protocol import credentials, errors, natsjwt


@dataclass(frozen=True)
class SiteRecord:
    """What the management cluster says of the site."""

    exists: bool
    """A ``Site`` object that is not being deleted."""
    key: str = ""
    """The user key its credential was last minted for (``status.credential.publicKey``)."""


@dataclass(frozen=True)
class Verdict:
    reason: str = ""
    """Why the request is refused; empty when it is granted."""
    revoke: tuple[str, ...] = ()
    """User keys to revoke once the answer is sent."""

    @property
    def granted(self) -> bool:
        return not self.reason


@dataclass(frozen=True)
class Issuer:
    """Who mints: the account and the public key of its signing key."""

    account: str
    signing_key: str


def _minted_here(presented: natsjwt.Claims, issuer: Issuer) -> bool:
    return (
        isinstance(presented.nats, natsjwt.User)
        and presented.iss == issuer.signing_key
        and presented.nats.issuer_account == issuer.account
    )


def _role(kind: credentials.Kind) -> str:
    return "bootstrap" if kind is credentials.Kind.BOOTSTRAP else "site"


def judge(
    req: credentials.Request,
    presented: natsjwt.Claims,
    *,
    site: str,
    issuer: Issuer,
    record: SiteRecord,
    used_bootstraps: Collection[str] = (),
) -> Verdict:
    """Grant or refuse (with the reason, naming what is wrong) ``req`` for ``site``."""
    role = _role(req.kind)
    if not _minted_here(presented, issuer):
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
    if presented.sub in used_bootstraps:
        return Verdict(
            f"bootstrap credential {presented.sub} was used already: a bootstrap credential is "
            "single-use (make a new one: `kamaji-broker site add`, or the Site's bootstrap Secret)"
        )
    replaced = (record.key,) if record.key and record.key != req.public_key else ()
    return Verdict(revoke=(presented.sub, *replaced))
