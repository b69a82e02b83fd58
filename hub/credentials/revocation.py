"""Revoking NATS users (operator mode): the account JWT with a revocation, pushed to the resolver.

nats-server refuses, and disconnects at once, every user whose JWT was issued at or before the
time its public key is revoked at in the account JWT. The hub looks up the account JWT the
resolver holds (``$SYS.REQ.ACCOUNT.<account>.CLAIMS.LOOKUP``), adds the revocations, signs the
account again with the operator's signing key and pushes it (``$SYS.REQ.CLAIMS.UPDATE``): every
server of the cluster applies it, no file is edited and nothing is reloaded. The full resolver
keeps it across restarts.

Only the revocations are taken from the JWT the resolver holds; the rest of the account (its
limits, its signing key) comes from the code (``common.files.operator.account_jwt``), so a
tampered lookup could at most add revocations. An entry older than the longest lifetime of any
JWT the hub mints is dropped: every JWT it covered has expired by then.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass

import msgspec

from common import bus
from common.bus import errors as bus_errors
from common.files import operator
from hub.credentials import rules
from protocol import credentials, errors, natsjwt

log = logging.getLogger(__name__)

UPDATE_SUBJECT = "$SYS.REQ.CLAIMS.UPDATE"


def lookup_subject(account: str) -> str:
    return f"$SYS.REQ.ACCOUNT.{account}.CLAIMS.LOOKUP"


@dataclass(frozen=True)
class Authority:
    """What the hub holds in operator mode: the account it mints users of (public key and
    signing-key seed) and the operator signing key it re-signs that account with."""

    account: str
    account_signing: bytes
    operator_signing: bytes
    keep_for: dt.timedelta = credentials.DEFAULT_LIFETIME
    signing_keys: tuple[str, ...] = ()
    """Every key the account's users may be signed by (the hub's own first; during a rotation
    also the one rotated out); empty: the hub's own only."""

    @property
    def account_signing_keys(self) -> tuple[str, ...]:
        return self.signing_keys or (natsjwt.public_of(self.account_signing),)

    def __repr__(self) -> str:  # never the seeds
        return f"Authority(account={self.account})"

    def mint(self, claims: natsjwt.Claims) -> str:
        return natsjwt.encode(claims, natsjwt.key_pair(self.account_signing))


def issuer(authority: Authority) -> rules.Issuer:
    """Who mints, as ``hub.credentials.rules`` checks a credential against it."""
    return rules.Issuer(
        account=authority.account,
        signing_keys=authority.account_signing_keys,
        keep_for_seconds=int(authority.keep_for.total_seconds()),
    )


def merged(
    held: Mapping[str, int], revoke: Mapping[str, int], *, now: dt.datetime, keep_for: dt.timedelta
) -> dict[str, int]:
    """``held`` with ``revoke`` added (the later time wins for a key), without entries older
    than ``keep_for`` (whatever they covered has expired)."""
    oldest = int((now - keep_for).timestamp())
    out = {k: t for k, t in held.items() if t >= oldest}
    for key, at in revoke.items():
        out[key] = max(at, out.get(key, 0))
    return out


def uncovered(pending: Mapping[str, int], pushed: Mapping[str, int]) -> dict[str, int]:
    """What of ``pending`` a push of ``pushed`` did not revoke: a revocation asked for while
    that push was on its way (``Revoker.revoke`` adds to ``pending`` before it waits its turn)."""
    return {k: t for k, t in pending.items() if pushed.get(k, 0) < t}


class _Result(msgspec.Struct):
    code: int = 0
    message: str = ""
    description: str = ""


class _Reply(msgspec.Struct):
    data: _Result | None = None
    error: _Result | None = None


def _check_update(reply: bytes, *, account: str) -> None:
    try:
        answer = msgspec.json.decode(reply, type=_Reply)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise bus_errors.BusError(f"account {account}: the resolver's answer is not JSON") from None
    if answer.error is not None or answer.data is None or answer.data.code != 200:
        why = answer.error.description if answer.error else "no confirmation"
        raise bus_errors.BusError(f"account {account}: the resolver refused the update: {why}")


async def held_account(system: bus.Connection, account: str) -> natsjwt.Claims:
    """The account JWT's claims as the resolver holds them now."""
    token = (await system.request(lookup_subject(account), b"")).decode("ascii", "replace")
    try:
        claims = natsjwt.decode(token)
    except errors.JWTError as exc:
        raise bus_errors.BusError(f"account {account}: the resolver's JWT: {exc}") from None
    if claims.sub != account or not isinstance(claims.nats, natsjwt.Account):
        raise bus_errors.BusError(f"account {account}: the resolver answered with {claims.sub}'s JWT")
    return claims


def _account(claims: natsjwt.Claims) -> natsjwt.Account:
    assert isinstance(claims.nats, natsjwt.Account)  # held_account checked it
    return claims.nats


async def held_revocations(system: bus.Connection, account: str) -> dict[str, int]:
    """The revocations of the account JWT the resolver holds now."""
    return dict(_account(await held_account(system, account)).revocations)


class Revoker:
    """The hub's one writer of the account JWT.

    - One push at a time (``_lock``): two pushes that read the same copy would each drop what
      the other added.
    - Every revocation it pushed or saw is remembered (``known``, within ``keep_for``) and goes
      into every push: a lookup answered by a node whose resolver started from the preload
      (a lost volume) shows none of them, and merging into that alone would wipe them.
    - Each push is issued after everything it has seen (``_last_iat``): servers keep the newer.
    - A revocation that could not be pushed stays ``pending`` and is pushed by ``sync`` (the
      hub calls it every minute), never dropped; nor is one asked for while a push is on its
      way (it waits for the lock and goes into the next push).
    """

    def __init__(self, system: bus.Connection, authority: Authority) -> None:
        self.system = system
        self.authority = authority
        self.known: dict[str, int] = {}
        self.pending: dict[str, int] = {}
        self._last_iat = 0
        self._lock = asyncio.Lock()

    async def revoke(self, keys: Mapping[str, int], *, now: dt.datetime) -> dict[str, int]:
        """Revoke every user key of ``keys`` (public key → unix time: its JWTs issued at or
        before it); the account's revocations now. A failure leaves them pending (and raises)."""
        self.pending = merged(self.pending, keys, now=now, keep_for=self.authority.keep_for)
        async with self._lock:
            revocations = await self._push_with(now=now)
        log.info("revoked NATS users %s", ", ".join(sorted(keys)))
        return revocations

    async def sync(self, *, now: dt.datetime) -> bool:
        """Push the account as the hub holds it when the resolver's copy differs from it: its
        signing keys (after a rotation), the operator signing key that signed it (before one is
        retired, every node's copy is signed by the new one), a revocation missing (a node that
        started from the preload) or pending. Whether it pushed."""
        async with self._lock:
            held = await held_account(self.system, self.authority.account)
            self._seen(held)
            account = _account(held)
            expected = merged(self.known, self.pending, now=now, keep_for=self.authority.keep_for)
            current = (
                account.signing_keys == self.authority.account_signing_keys
                and account.limits == operator.ACCOUNT_LIMITS
                and held.iss == natsjwt.public_of(self.authority.operator_signing)
                and all(account.revocations.get(k, 0) >= t for k, t in expected.items())
            )
            if current:
                return False
            await self._push_with(now=now, held=held)
        log.info(
            "account %s pushed with signing keys %s",
            self.authority.account,
            ", ".join(self.authority.account_signing_keys),
        )
        return True

    async def revoked(self) -> set[str]:
        """Every user key revoked as far as the hub knows: what it pushed, saw or has pending,
        after a look at the resolver's copy now (another replica, or ``kamaji-broker observer
        revoke``, may have revoked a key since: this hub must not mint for it). One request per
        call: it is asked once per credential request. BusError if it cannot look."""
        held = await held_account(self.system, self.authority.account)
        async with self._lock:
            self._seen(held)
        return {*self.known, *self.pending}

    def _seen(self, held: natsjwt.Claims) -> None:
        self._last_iat = max(self._last_iat, held.iat)
        self.known = merged(
            self.known, _account(held).revocations, now=_now(), keep_for=self.authority.keep_for
        )

    async def _push_with(self, *, now: dt.datetime, held: natsjwt.Claims | None = None) -> dict[str, int]:
        if held is None:
            held = await held_account(self.system, self.authority.account)
            self._seen(held)
        revocations = merged(
            merged(self.known, _account(held).revocations, now=now, keep_for=self.authority.keep_for),
            self.pending,
            now=now,
            keep_for=self.authority.keep_for,
        )
        iat = max(int(now.timestamp()), self._last_iat + 1)
        token = operator.account_jwt(
            self.authority.account,
            signing_keys=self.authority.account_signing_keys,
            operator_signing=self.authority.operator_signing,
            revocations=revocations,
            iat=iat,
        )
        _check_update(
            await self.system.request(UPDATE_SUBJECT, token.encode("ascii")), account=self.authority.account
        )
        self._last_iat = iat
        self.known = revocations
        # Not emptied: a revocation added while this push was on its way is the next push's.
        self.pending = uncovered(self.pending, revocations)
        return revocations


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


async def revoke(
    system: bus.Connection, authority: Authority, keys: Mapping[str, int], *, now: dt.datetime
) -> dict[str, int]:
    """A one-off revocation (the hub itself keeps one ``Revoker``)."""
    return await Revoker(system, authority).revoke(keys, now=now)


async def sync_account(system: bus.Connection, authority: Authority, *, now: dt.datetime) -> bool:
    """A one-off ``Revoker.sync``."""
    return await Revoker(system, authority).sync(now=now)
