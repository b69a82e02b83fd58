"""The hub in operator mode: what ``--nats-operator-dir`` holds, and the hub's own identity.

The directory is ``nats-config --auth operator``'s DIR/hub (``common.files.operator``):
``account.jwt`` (the account, public), ``account-signing.nk`` (mints every user: sites, and the
hub itself), ``operator-signing.nk`` (re-signs the account with a revocation) and
``system.creds`` (the hub's system-account user, which pushes it). ``load`` checks that they
belong together, naming the file that does not. The hub's own user is minted by the hub at
start, with a key that never leaves the process (``hub_identity``), and minted again at half
its lifetime (``refresh``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common import bus
from common.bus import errors as bus_errors
from common.bus import identity as natsidentity
from common.files import keys
from hub.credentials import revocation
from protocol import credentials, errors, natsjwt

log = logging.getLogger(__name__)

FILES = ("account.jwt", "account-signing.nk", "operator-signing.nk", "system.creds")


@dataclass(frozen=True)
class OperatorMode:
    authority: revocation.Authority
    system_creds: Path


def _seed(path: Path, role: natsjwt.Role) -> bytes:
    """The NKey seed of ``role`` at ``path`` (a private file: group read is tolerated, as
    Kubernetes mounts Secrets 0440 with the pod's fsGroup); never echoed in an error."""
    keys.check_private(path, group_ok=True)
    seed = path.read_bytes().strip()
    try:
        natsjwt.public_key(natsjwt.public_of(seed), role)
    except errors.JWTError:
        raise ValueError(f"{path}: not the NKey seed of an {role}") from None
    return seed


def load(directory: Path, *, lifetime: dt.timedelta = credentials.DEFAULT_LIFETIME) -> OperatorMode:
    """The hub's operator-mode material; ValueError naming the file that is missing or wrong."""
    for name in FILES:
        if not (directory / name).is_file():
            raise ValueError(
                f"--nats-operator-dir {directory}: {name} is missing "
                "(`nats-config --auth operator` writes them in DIR/hub)"
            )
    try:
        account = natsjwt.decode((directory / "account.jwt").read_text(), now=0)
    except errors.JWTError as exc:
        raise ValueError(f"{directory / 'account.jwt'}: {exc}") from None
    signing = _seed(directory / "account-signing.nk", "account")
    operator_signing = _seed(directory / "operator-signing.nk", "operator")
    if (
        not isinstance(account.nats, natsjwt.Account)
        or natsjwt.public_of(signing) not in account.nats.signing_keys
    ):
        raise ValueError(
            f"{directory / 'account-signing.nk'} is not a signing key of the account in account.jwt"
        )
    if account.iss != natsjwt.public_of(operator_signing):
        raise ValueError(
            f"{directory / 'operator-signing.nk'} did not sign account.jwt: not this operator's key"
        )
    authority = revocation.Authority(
        account=account.sub,
        account_signing=signing,
        operator_signing=operator_signing,
        keep_for=lifetime,
        signing_keys=(
            natsjwt.public_of(signing),
            *(k for k in account.nats.signing_keys if k != natsjwt.public_of(signing)),
        ),
    )
    return OperatorMode(authority=authority, system_creds=directory / "system.creds")


def hub_identity(mode: OperatorMode, *, prefix: str, lifetime: dt.timedelta) -> natsidentity.SelfMinted:
    def mint(key: str, now: dt.datetime) -> str:
        claims = credentials.hub_user(
            key, account=mode.authority.account, now=now, lifetime=lifetime, prefix=prefix
        )
        return mode.authority.mint(claims)

    return natsidentity.SelfMinted(mint)


def bootstrap_minter(
    mode: OperatorMode, *, prefix: str, lifetime: dt.timedelta
) -> Callable[[str, dt.datetime], str]:
    """``mint(site, now)``: a bootstrap ``.creds`` for ``site``, with a key of its own each time."""

    def mint(site: str, now: dt.datetime) -> str:
        seed = natsjwt.new_seed("user")
        claims = credentials.bootstrap_user(
            site,
            natsjwt.public_of(seed),
            account=mode.authority.account,
            now=now,
            lifetime=lifetime,
            prefix=prefix,
        )
        return natsjwt.creds(mode.authority.mint(claims), seed)

    return mint


ACCOUNT_CHECK_INTERVAL = 60.0
"""Seconds between looks at the account the resolver holds (one request)."""


async def keep_account(revoker: revocation.Revoker) -> None:
    """Keep the resolver's account as the hub holds it (``Revoker.sync``): at once (a rotated
    signing key reaches the servers when the hub starts with it), then every
    ``ACCOUNT_CHECK_INTERVAL`` (a node whose resolver started from the oldest preload catches up;
    a revocation that failed is pushed)."""
    while True:
        try:
            await revoker.sync(now=dt.datetime.now(dt.UTC))
        except bus_errors.BusError as exc:
            log.warning("cannot check the NATS account %s: %s; retrying", revoker.authority.account, exc)
        await asyncio.sleep(ACCOUNT_CHECK_INTERVAL)


async def refresh(conn: bus.Connection, identity: natsidentity.SelfMinted) -> None:
    """Reconnect at half the hub's JWT lifetime, so that the server never sees it expire (it
    would close the connection): the reconnect presents a freshly minted one."""
    while True:
        expires = identity.expires_at
        if expires is None:
            return
        left = (expires - dt.datetime.now(dt.UTC)).total_seconds()
        await asyncio.sleep(max(1.0, left / 2))
        if (expires - dt.datetime.now(dt.UTC)).total_seconds() <= left / 2 + 1:
            log.info("renewing the hub's own NATS credential (it expires at %s)", expires.isoformat())
            await conn.reconnect()
