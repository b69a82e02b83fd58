"""``kamaji-broker nats-config`` and ``kamaji-broker site``: the NATS server's files on disk.

    DIR/nats-server.conf     main configuration: listen, JetStream store, include auth.conf; with
                             a cluster also its routes (``--config-file`` names it otherwise, so
                             the nodes of a cluster on one host share DIR and its auth.conf)
    DIR/auth.conf            users: the hub and every site (re-rendered on each change)
    DIR/hub.nk, hub.pub      the hub's NKey seed (0600) and public key
    DIR/observer.nk, .pub    ``kamaji-broker status``'s read-only user (``permissions.for_observer``)
    DIR/sites/<site>.nk      a site's NKey seed (0600): hand it to that site's agent only
    DIR/sites/<site>.pub     its public key
    DIR/sites/<site>.conf    its user block with exactly the permissions of ``protocol.permissions``
    DIR/tls/                 with ``--tls-generate``: CA and server certificate (``common.files.tls``)

With ``auth="operator"`` (NATS decentralized authentication) there is no auth.conf, no hub
seed and no per-site file: DIR/operator.conf, the keys and JWTs of ``common.files.operator``, and
each node's resolver directory (STORE/resolver) replace them; the hub mints every user, except
``kamaji-broker status``'s read-only one: DIR/observer.creds (its seed in DIR/observer.nk), signed
again with the account's current signing key at every run, valid for a day by default
(``observer_issue`` signs it again; ``observer_new_key`` replaces its key, once the old one is
revoked: ``kamaji-broker observer``).

Every command is idempotent: an existing seed is kept, blocks are re-rendered from the code's
current permissions.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import nkeys

from common.files import atomic, operator, serverconf
from common.files import tls as tlsfiles
from protocol import credentials, labels, permissions, subjects

MAIN_FILE = "nats-server.conf"
Auth = Literal["static", "operator"]
RESOLVER_DIR = "resolver"
SITES_DIR = "sites"
HUB_SEED = "hub.nk"
OBSERVER_SEED = "observer.nk"
OBSERVER_CREDS = "observer.creds"


@dataclass(frozen=True)
class Identity:
    name: str
    seed_file: Path
    public_key: str


def _identity(seed_file: Path, name: str) -> Identity:
    """Load the NKey user seed at ``seed_file``, creating it (0600) if absent."""
    if seed_file.exists():
        seed = seed_file.read_bytes().strip()
    else:
        seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
        atomic.write_private(seed_file, seed.decode() + "\n")
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    atomic.write_public(seed_file.with_suffix(".pub"), public + "\n")
    return Identity(name=name, seed_file=seed_file, public_key=public)


def render_auth(config_dir: Path, *, prefix: str) -> Path:
    users = (
        ("hub.pub", permissions.for_hub(prefix=prefix), "hub (management cluster)"),
        (
            "observer.pub",
            permissions.for_observer(prefix=prefix),
            "observer (kamaji-broker status: read only)",
        ),
    )
    blocks = [
        serverconf.user_block((config_dir / pub).read_text().strip(), perms, comment=comment)
        for pub, perms, comment in users
        if (config_dir / pub).exists()
    ]
    blocks += [p.read_text() for p in sorted((config_dir / SITES_DIR).glob("*.conf"))]
    path = config_dir / serverconf.AUTH_FILE
    atomic.write_public(path, serverconf.auth(blocks))
    return path


def _check(prefix: str, config_file: str, tls: tlsfiles.Paths | None) -> None:
    subjects.check_prefix(prefix)
    reserved = (serverconf.AUTH_FILE, serverconf.OPERATOR_FILE)
    if Path(config_file).name != config_file or config_file in reserved:
        raise ValueError(f"--config-file {config_file!r}: a file name in DIR (not {' or '.join(reserved)})")
    if tls is not None:
        tlsfiles.check(tls)


def _operator_files(
    config_dir: Path, observer: Identity, *, prefix: str, observer_lifetime: dt.timedelta
) -> None:
    """The operator's, accounts' and hub's files, and the observer's user signed anew."""
    keys = operator.Keys.load_or_create(config_dir)
    operator.write(keys)
    creds = keys.observer_creds(observer.seed_file, prefix=prefix, lifetime=observer_lifetime)
    atomic.write_private(config_dir / OBSERVER_CREDS, creds)


def observer_issue(
    config_dir: Path,
    *,
    prefix: str = subjects.DEFAULT_PREFIX,
    lifetime: dt.timedelta = credentials.DEFAULT_OBSERVER_LIFETIME,
) -> Path:
    """Operator mode: DIR/observer.creds signed again for the observer's key, valid for
    ``lifetime`` from now; its path. Nothing else in DIR changes."""
    subjects.check_prefix(prefix)
    if not operator_mode(config_dir):
        raise ValueError(f"{config_dir} is not in operator mode: the observer's NKey user has no lifetime")
    observer = _identity(config_dir / OBSERVER_SEED, "observer")
    keys = operator.Keys.load_or_create(config_dir)
    path = config_dir / OBSERVER_CREDS
    atomic.write_private(path, keys.observer_creds(observer.seed_file, prefix=prefix, lifetime=lifetime))
    return path


def observer_new_key(config_dir: Path, *, prefix: str = subjects.DEFAULT_PREFIX) -> Identity:
    """A new key for the observer (its old key's public key is no longer in DIR); with static
    users auth.conf is rendered again (reload the server). Operator mode: issue its creds next."""
    for name in (OBSERVER_SEED, "observer.pub"):
        (config_dir / name).unlink(missing_ok=True)
    observer = _identity(config_dir / OBSERVER_SEED, "observer")
    if not operator_mode(config_dir):
        render_auth(config_dir, prefix=prefix)
    return observer


def nats_config(
    config_dir: Path,
    *,
    host: str = "0.0.0.0",
    port: int = 4222,
    store_dir: Path | None = None,
    server_name: str = "kamaji-broker",
    prefix: str = subjects.DEFAULT_PREFIX,
    monitor: str | None = None,
    tls: tlsfiles.Paths | None = None,
    cluster: serverconf.Cluster | None = None,
    config_file: str = MAIN_FILE,
    auth: Auth = "static",
    observer_lifetime: dt.timedelta = credentials.DEFAULT_OBSERVER_LIFETIME,
) -> tuple[Path, Identity | None]:
    """Write the main configuration (with ``tls``: clients must use TLS with that certificate;
    with ``cluster``: this server is one node of that cluster, the routes TLS too with ``tls``).
    The hub's static identity, or None in operator mode (the hub mints its own)."""
    _check(prefix, config_file, tls)
    config_dir.mkdir(parents=True, exist_ok=True)
    store = store_dir if store_dir is not None else config_dir / "jetstream"
    observer = _identity(config_dir / OBSERVER_SEED, "observer")
    if auth == "operator":
        _operator_files(config_dir, observer, prefix=prefix, observer_lifetime=observer_lifetime)
        hub = None
        auth_file, resolver_dir = serverconf.OPERATOR_FILE, str((store / RESOLVER_DIR).absolute())
    else:
        hub = _identity(config_dir / HUB_SEED, "hub")
        auth_file, resolver_dir = serverconf.AUTH_FILE, None
    main = config_dir / config_file
    atomic.write_public(
        main,
        serverconf.main(
            host=host,
            port=port,
            store_dir=str(store.absolute()),
            server_name=server_name,
            monitor=monitor,
            tls_cert=str(tls.cert.absolute()) if tls else None,
            tls_key=str(tls.key.absolute()) if tls else None,
            tls_ca=str(tls.ca.absolute()) if tls and tls.ca else None,
            cluster_of=cluster,
            auth_file=auth_file,
            resolver_dir=resolver_dir,
        ),
    )
    if hub is not None:
        render_auth(config_dir, prefix=prefix)
    return main, hub


def site_add(config_dir: Path, site: str, *, prefix: str = subjects.DEFAULT_PREFIX) -> Identity:
    labels.check(site, field="site name")
    subjects.check_prefix(prefix)
    sites = config_dir / SITES_DIR
    identity = _identity(sites / f"{site}.nk", site)
    block = serverconf.user_block(
        identity.public_key, permissions.for_site(site, prefix=prefix), comment=f"site {site}"
    )
    atomic.write_public(sites / f"{site}.conf", block)
    render_auth(config_dir, prefix=prefix)
    return identity


BOOTSTRAP_SUFFIX = ".bootstrap.creds"


def operator_mode(config_dir: Path) -> bool:
    """Whether ``config_dir`` was written by ``nats-config --auth operator``."""
    return (config_dir / operator.KEYS_DIR / "account-signing.nk").is_file()


def site_bootstrap(
    config_dir: Path, site: str, *, lifetime: dt.timedelta, prefix: str = subjects.DEFAULT_PREFIX
) -> Path:
    """Operator mode: a fresh single-use bootstrap credential for ``site`` (0600), to hand to its
    agent, which makes its own key and asks the hub for its credential with this. Nothing
    changes on the servers."""
    labels.check(site, field="site name")
    subjects.check_prefix(prefix)
    keys = operator.Keys.load_or_create(config_dir)
    path = config_dir / SITES_DIR / f"{site}{BOOTSTRAP_SUFFIX}"
    (config_dir / SITES_DIR).mkdir(exist_ok=True)
    atomic.write_private(
        path, keys.bootstrap_creds(site, now=dt.datetime.now(dt.UTC), lifetime=lifetime, prefix=prefix)
    )
    return path


def site_remove(config_dir: Path, site: str, *, prefix: str = subjects.DEFAULT_PREFIX) -> None:
    labels.check(site, field="site name")
    sites = config_dir / SITES_DIR
    if operator_mode(config_dir):  # the hub revokes the agent when its Site is deleted
        (sites / f"{site}{BOOTSTRAP_SUFFIX}").unlink(missing_ok=True)
        return
    if not (sites / f"{site}.conf").exists():
        raise FileNotFoundError(f"site {site!r} is not configured in {config_dir}")
    for suffix in (".conf", ".nk", ".pub"):
        (sites / f"{site}{suffix}").unlink(missing_ok=True)
    render_auth(config_dir, prefix=prefix)


def site_list(config_dir: Path) -> list[Identity]:
    sites = config_dir / SITES_DIR
    return [
        Identity(name=p.stem, seed_file=p.with_suffix(".nk"), public_key=p.read_text().strip())
        for p in sorted(sites.glob("*.pub"))
    ]
