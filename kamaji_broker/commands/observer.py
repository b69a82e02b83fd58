"""``kamaji-broker observer issue|revoke``: the credential of ``kamaji-broker status``'s read-only
user, ``observer.creds`` (operator mode) or ``observer.nk`` (static users), in a
``nats-config`` directory.

``issue`` signs ``observer.creds`` again for the observer's key, valid for ``--lifetime``
(``common.files.natsserver.observer_issue``): nothing else in the directory changes, so it can run
from cron or before each ``status``. ``revoke`` ends every credential of the observer's
current key and gives it a new key: in operator mode it pushes the account with the revocation
to the servers' resolver (``hub.credentials.revocation``, with the hub's system user ``hub/system.creds``;
every server disconnects a connected observer at once), then issues ``observer.creds`` for the
new key; with static users it renders auth.conf with the new key (reload the server).

The revocation is dated at the old credential's expiry (a JWT issued at or before that time
is refused), so it outlives that credential whatever the hub keeps its revocations for. With
``observer.creds`` lost (or damaged) the old key is read from ``observer.nk`` and, its
credentials' expiry unknown, revoked for good: a lost file is when a copy matters most. The
hub is the account's usual writer: a push of its that read the account just before this one
would drop this revocation, so the command reads the account back and pushes again until the
revocation is there.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
from pathlib import Path

from common import bus, durations
from common.bus import errors as bus_errors
from common.files import natsserver, operator
from hub.credentials import revocation
from protocol import credentials, errors, natsjwt, subjects

KEEP_EVERY_REVOCATION = dt.timedelta(days=3650)
"""How far back the push keeps what the account holds: all of it (the hub prunes, not this)."""
CONFIRM_ATTEMPTS = 3
CONFIRM_WAIT = 1.0
"""Seconds between pushing the revocation and reading the account back."""


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ob = sub.add_parser("observer", help="kamaji-broker status's read-only NATS user: issue, revoke")
    ob_sub = ob.add_subparsers(dest="observer_command", required=True, metavar="ACTION")
    for action, helptext in (
        ("issue", "sign observer.creds again, valid for --lifetime (operator mode)"),
        ("revoke", "end every credential of the observer's key and give it a new key and credential"),
    ):
        a = ob_sub.add_parser(action, help=helptext)
        a.add_argument("--nats-config-dir", required=True, type=Path, help="what nats-config wrote")
        a.add_argument("--prefix", default=subjects.DEFAULT_PREFIX, help="subject prefix (default: kb)")
        a.add_argument(
            "--lifetime",
            type=durations.parse,
            default=credentials.DEFAULT_OBSERVER_LIFETIME.total_seconds(),
            metavar="DURATION",
            help="how long the new observer.creds is valid (default 24h)",
        )
        if action == "revoke":
            a.add_argument("--nats-url", help="operator mode: NATS URL(s), comma separated, to push to")
            a.add_argument("--nats-ca-file", type=Path, help="CA certificate (PEM) the server must chain to")


def run(args: argparse.Namespace) -> int:
    config_dir: Path = args.nats_config_dir
    lifetime = dt.timedelta(seconds=args.lifetime)
    if args.observer_command == "issue":
        path = natsserver.observer_issue(config_dir, prefix=args.prefix, lifetime=lifetime)
        print(f"{path}: valid until {_expiry(path)}", file=sys.stderr)
        return 0
    if not natsserver.operator_mode(config_dir):
        identity = natsserver.observer_new_key(config_dir, prefix=args.prefix)
        print(
            f"observer: new NKey {identity.public_key} ({identity.seed_file}); the old one is out of "
            "auth.conf: reload the server (nats-server --signal reload)",
            file=sys.stderr,
        )
        return 0
    old = _current(config_dir)
    if old:
        if not args.nats_url:
            raise ValueError("--nats-url is needed in operator mode: the revocation is pushed to the servers")
        servers = tuple(u.strip() for u in str(args.nats_url).split(",") if u.strip())
        keys = ", ".join(old)
        try:
            asyncio.run(_push(config_dir, old, servers=servers, ca_file=args.nats_ca_file))
        except bus_errors.BusError as exc:  # nothing changed in DIR: the old key is still the observer's
            print(f"kamaji-broker observer: error: revoking {keys}: {exc}", file=sys.stderr)
            return 1
        print(f"observer: revoked key {keys} (every server refuses its credentials now)", file=sys.stderr)
    identity = natsserver.observer_new_key(config_dir, prefix=args.prefix)
    path = natsserver.observer_issue(config_dir, prefix=args.prefix, lifetime=lifetime)
    print(f"observer: new key {identity.public_key}; {path} valid until {_expiry(path)}", file=sys.stderr)
    return 0


def _current(config_dir: Path) -> dict[str, int]:
    """The observer's keys there are now, each with the time its revocation is dated at: the
    key ``observer.creds`` is for, until it expires; the key in ``observer.nk`` when the creds
    are lost or for another key, for good. Empty: no observer yet, nothing to revoke."""
    now = dt.datetime.now(dt.UTC)
    keys: dict[str, int] = {}
    try:
        text = (config_dir / natsserver.OBSERVER_CREDS).read_text()
        creds = natsjwt.decode(natsjwt.jwt_of_creds(text), now=0)
        keys[creds.sub] = max(creds.exp, int(now.timestamp()))
    except (OSError, errors.JWTError):
        pass
    try:
        seed_key = natsjwt.public_of((config_dir / natsserver.OBSERVER_SEED).read_bytes())
    except (OSError, errors.JWTError):
        return keys
    keys.setdefault(seed_key, int((now + KEEP_EVERY_REVOCATION).timestamp()))
    return keys


def _expiry(path: Path) -> str:
    exp = natsjwt.decode(natsjwt.jwt_of_creds(path.read_text()), now=0).exp
    return dt.datetime.fromtimestamp(exp, dt.UTC).isoformat().replace("+00:00", "Z")


async def _push(
    config_dir: Path, old: dict[str, int], *, servers: tuple[str, ...], ca_file: Path | None
) -> None:
    """Revoke the ``old`` keys on the servers, each until its time, and make sure the account
    keeps them."""
    keys = operator.Keys.load_or_create(config_dir)
    authority = revocation.Authority(
        account=keys.account_public,
        account_signing=keys.account_signing,
        operator_signing=keys.operator_signing,
        keep_for=KEEP_EVERY_REVOCATION,
        signing_keys=keys.account_signing_keys,
    )
    now = dt.datetime.now(dt.UTC)
    options = bus.Options(
        servers=servers,
        creds_file=config_dir / operator.HUB_SYSTEM_CREDS,
        ca_file=ca_file,
        name="kamaji-broker-observer-revoke",
    )
    system = await bus.connect(options, deadline=10)
    try:
        for _ in range(CONFIRM_ATTEMPTS):
            await revocation.Revoker(system, authority).revoke(old, now=now)
            await asyncio.sleep(CONFIRM_WAIT)
            held = await revocation.held_revocations(system, authority.account)
            if all(held.get(key, 0) >= until for key, until in old.items()):
                return
    finally:
        await system.close()
    raise bus_errors.BusError(
        f"the account lost the observer's revocation {CONFIRM_ATTEMPTS} times (another writer pushed "
        "over it): run `kamaji-broker observer revoke` again"
    )
