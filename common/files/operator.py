"""Operator mode on disk: the NKeys and JWTs of NATS decentralized authentication.

    DIR/operator/operator.nk           operator identity seed: offline, only to re-sign the
                                       operator JWT when a signing key is rotated
    DIR/operator/operator-signing.nk   operator signing key: the hub's, to re-sign the account
                                       JWT with a revocation
    DIR/operator/system.nk             system account seed: offline, signs the hub's system user
    DIR/operator/account.nk            the kamaji-broker account's identity seed: offline
    DIR/operator/account-signing.nk    the account's signing key: the hub's, to mint users
    DIR/operator/*.jwt                 the operator, system and account JWTs (public)
    DIR/operator/*-signing.previous    public keys of signing keys being rotated out
                                       (``rotate``): still listed, so what they signed stays
                                       valid until ``retire_previous``
    DIR/hub/                           everything the hub needs, and nothing more (mount it as
                                       the hub's Secret, ``--nats-operator-dir``):
        account.jwt                    the account (public: its key, its signing key)
        account-signing.nk             copy of the account's signing key (mints users)
        operator-signing.nk            copy of the operator's signing key (re-signs the account)
        system.creds                   the hub's system-account user: it may only push and look
                                       up account JWTs ($SYS.REQ.CLAIMS.UPDATE, ...LOOKUP)
    DIR/operator.conf                  what nats-server includes (``serverconf.operator``)

Every seed is 0600 and every file is kept if it exists (a later ``nats-config`` changes no
identity, so nothing minted before stops working). The account JWT written here carries no
revocations and stays the oldest: the resolver's own copy, which the hub updates, is newer and
wins over it when a server starts.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common.files import atomic, serverconf
from protocol import credentials, errors, natsjwt, permissions

KEYS_DIR = "operator"
HUB_DIR = "hub"
HUB_SYSTEM_CREDS = f"{HUB_DIR}/system.creds"
"""The hub's system-account user, relative to the configuration directory."""
ACCOUNT_NAME = "kamaji-broker"
SYSTEM_ACCOUNT_NAME = "SYS"

_UNLIMITED = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True}
ACCOUNT_LIMITS: dict[str, int | bool] = {
    **_UNLIMITED,
    "conn": -1,
    "leaf": -1,
    "disallow_bearer": True,
    # JetStream on, bounded per stream by the hub's stream limits (protocol.streams)
    "mem_storage": -1,
    "disk_storage": -1,
    "streams": -1,
    "consumer": -1,
}
"""The kamaji-broker account: JetStream enabled (zero storage would disable it), no bearer
tokens (every user proves it holds its seed)."""


def hub_system_permissions(account: str) -> permissions.Permissions:
    """The hub's system-account user: push the account's JWT (a revocation) and look it up."""
    return permissions.Permissions(
        publish=("$SYS.REQ.CLAIMS.UPDATE", f"$SYS.REQ.ACCOUNT.{account}.CLAIMS.LOOKUP"),
        subscribe=("_INBOX.>",),
    )


def load_seed(path: Path, role: natsjwt.Role) -> bytes:
    """The NKey seed at ``path``, made (0600) if absent; ValueError naming the file if damaged."""
    if path.exists():
        seed = path.read_bytes().strip()
        try:
            natsjwt.key_pair(seed)
        except errors.JWTError:  # named by its file, never echoed
            raise ValueError(f"{path}: not an NKey seed (restore it from your backup)") from None
        return seed
    seed = natsjwt.new_seed(role)
    atomic.write_private(path, seed.decode("ascii") + "\n")
    return seed


def previous_keys(path: Path) -> tuple[str, ...]:
    """The public keys of rotated-out signing keys listed at ``path`` (none if absent)."""
    if not path.exists():
        return ()
    return tuple(line.strip() for line in path.read_text().splitlines() if line.strip())


@dataclass(frozen=True)
class Keys:
    """The operator-mode keys of one configuration directory."""

    directory: Path
    operator: bytes
    operator_signing: bytes
    system: bytes
    account: bytes
    account_signing: bytes
    previous_operator_signing: tuple[str, ...] = ()
    previous_account_signing: tuple[str, ...] = ()

    @classmethod
    def load_or_create(cls, config_dir: Path) -> Keys:
        d = config_dir / KEYS_DIR
        d.mkdir(parents=True, exist_ok=True)
        return cls(
            directory=config_dir,
            operator=load_seed(d / "operator.nk", "operator"),
            operator_signing=load_seed(d / "operator-signing.nk", "operator"),
            system=load_seed(d / "system.nk", "account"),
            account=load_seed(d / "account.nk", "account"),
            account_signing=load_seed(d / "account-signing.nk", "account"),
            previous_operator_signing=previous_keys(d / "operator-signing.previous"),
            previous_account_signing=previous_keys(d / "account-signing.previous"),
        )

    @property
    def operator_signing_keys(self) -> tuple[str, ...]:
        return (natsjwt.public_of(self.operator_signing), *self.previous_operator_signing)

    @property
    def account_signing_keys(self) -> tuple[str, ...]:
        return (natsjwt.public_of(self.account_signing), *self.previous_account_signing)

    @property
    def account_public(self) -> str:
        return natsjwt.public_of(self.account)

    @property
    def system_public(self) -> str:
        return natsjwt.public_of(self.system)

    def operator_jwt(self) -> str:
        claims = natsjwt.Claims(
            sub=natsjwt.public_of(self.operator),
            iss="",
            iat=0,
            name="kamaji-broker-operator",
            nats=natsjwt.Operator(signing_keys=self.operator_signing_keys, system_account=self.system_public),
        )
        return natsjwt.encode(claims, natsjwt.key_pair(self.operator))

    def system_jwt(self) -> str:
        limits: dict[str, int | bool] = {**_UNLIMITED, "conn": -1, "leaf": -1}
        claims = natsjwt.Claims(
            sub=self.system_public,
            iss="",
            iat=0,
            name=SYSTEM_ACCOUNT_NAME,
            nats=natsjwt.Account(limits=limits),
        )
        return natsjwt.encode(claims, natsjwt.key_pair(self.operator))

    def account_jwt(self, *, iat: int = 0) -> str:
        """The kamaji-broker account without revocations, signed by the operator's signing key
        (as the hub signs it when it revokes); issued at ``iat`` (default: now)."""
        return account_jwt(
            self.account_public,
            signing_keys=self.account_signing_keys,
            operator_signing=self.operator_signing,
            revocations={},
            iat=iat,
        )

    def hub_system_creds(self) -> str:
        user = natsjwt.new_seed("user")
        perms = hub_system_permissions(self.account_public)
        claims = natsjwt.Claims(
            sub=natsjwt.public_of(user),
            iss="",
            iat=0,
            name="hub-system",
            nats=natsjwt.User(pub=natsjwt.Allow(perms.publish), sub=natsjwt.Allow(perms.subscribe)),
        )
        return natsjwt.creds(natsjwt.encode(claims, natsjwt.key_pair(self.system)), user)

    def user_creds(self, claims: natsjwt.Claims, seed: bytes) -> str:
        """A ``.creds`` file for ``claims`` (minted by ``protocol.credentials``), signed by the
        account's signing key."""
        return natsjwt.creds(natsjwt.encode(claims, natsjwt.key_pair(self.account_signing)), seed)

    def observer_creds(self, seed_file: Path, *, prefix: str, lifetime: dt.timedelta) -> str:
        """``kamaji-broker status``'s read-only user (the seed in ``seed_file``), valid for
        ``lifetime`` from now."""
        seed = seed_file.read_bytes().strip()
        claims = credentials.observer_user(
            natsjwt.public_of(seed),
            account=self.account_public,
            now=dt.datetime.now(dt.UTC),
            lifetime=lifetime,
            prefix=prefix,
        )
        return self.user_creds(claims, seed)

    def bootstrap_creds(self, site: str, *, now: dt.datetime, lifetime: dt.timedelta, prefix: str) -> str:
        """A fresh bootstrap credential for ``site`` (a new key each time)."""
        seed = natsjwt.new_seed("user")
        claims = credentials.bootstrap_user(
            site,
            natsjwt.public_of(seed),
            account=self.account_public,
            now=now,
            lifetime=lifetime,
            prefix=prefix,
        )
        return self.user_creds(claims, seed)


def account_jwt(
    account: str,
    *,
    signing_keys: tuple[str, ...],
    operator_signing: bytes,
    revocations: dict[str, int],
    iat: int = 0,
) -> str:
    """The kamaji-broker account's JWT with ``revocations``, its users signed by any of
    ``signing_keys``; the hub signs its updates with this too (one shape for the account,
    wherever it is signed)."""
    claims = natsjwt.Claims(
        sub=account,
        iss="",
        iat=iat,
        name=ACCOUNT_NAME,
        nats=natsjwt.Account(limits=ACCOUNT_LIMITS, signing_keys=signing_keys, revocations=dict(revocations)),
    )
    return natsjwt.encode(claims, natsjwt.key_pair(operator_signing))


def _kept(path: Path, make: Callable[[], str], *, private: bool = False) -> str:
    """The JWT (or creds) at ``path``, made and written only if absent: the account JWT in
    particular must stay the first one, older than every revocation the hub pushed since, or a
    server started with a fresh one would forget them."""
    if path.exists():
        return path.read_text().strip()
    text = make()
    (atomic.write_private if private else atomic.write_public)(path, text + "\n")
    return text


def _operator(keys: Keys) -> str:
    """The operator JWT: kept, unless its signing keys are no longer the keys' (a rotation)."""
    path = keys.directory / KEYS_DIR / "operator.jwt"
    if path.exists():
        held = natsjwt.decode(path.read_text(), now=0)
        if isinstance(held.nats, natsjwt.Operator) and held.nats.signing_keys == keys.operator_signing_keys:
            return path.read_text().strip()
    token = keys.operator_jwt()
    atomic.write_public(path, token + "\n")
    return token


def _preload(keys: Keys) -> str:
    """The account JWT the servers start with: signed with the keys as they are now, but issued
    when the first one was, so that it never looks newer than the resolver's copy (nats-server
    replaces the resolver's copy, with every revocation the hub pushed, by a newer preload)."""
    path = keys.directory / KEYS_DIR / "account.jwt"
    iat = natsjwt.decode(path.read_text(), now=0).iat if path.exists() else 0
    token = keys.account_jwt(iat=iat)
    if path.exists():
        held, made = natsjwt.decode(path.read_text(), now=0), natsjwt.decode(token, now=0)
        if (held.iss, held.nats) == (made.iss, made.nats):
            return path.read_text().strip()
    atomic.write_public(path, token + "\n")
    return token


def write(keys: Keys) -> Path:
    """Write the JWTs, the hub's system creds and ``operator.conf`` (keeping what exists), and
    the hub's directory with the account as it is now (its signing keys after a rotation: the
    hub pushes it to the resolver; the servers' preload stays the first, oldest one)."""
    d = keys.directory / KEYS_DIR
    operator = _operator(keys)
    system = _kept(d / "system.jwt", keys.system_jwt)
    account = _preload(keys)
    hub = keys.directory / HUB_DIR
    hub.mkdir(exist_ok=True)
    _kept(keys.directory / HUB_SYSTEM_CREDS, keys.hub_system_creds, private=True)
    atomic.write_public(hub / "account.jwt", keys.account_jwt() + "\n")
    atomic.write_private(hub / "account-signing.nk", keys.account_signing.decode("ascii") + "\n")
    atomic.write_private(hub / "operator-signing.nk", keys.operator_signing.decode("ascii") + "\n")
    path = keys.directory / serverconf.OPERATOR_FILE
    atomic.write_public(
        path,
        serverconf.operator(
            operator_jwt=operator,
            system_account=keys.system_public,
            preload={keys.system_public: system, keys.account_public: account},
        ),
    )
    return path
