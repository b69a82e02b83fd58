"""``kamaji-broker nats-config``: a nats-server configuration (JetStream, the hub's user, every
site's), optionally one node of a cluster and with TLS.

Checks what the flags combine to (``_cluster``: all three cluster flags or none; ``_tls``:
generated, brought by the operator, or none) and hands the files to ``common.files.natsserver``
(configuration) and ``common.files.tls`` (certificates).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

from common import durations
from common.files import natsserver, operator, rotation, serverconf
from common.files import tls as tlsfiles
from protocol import credentials, subjects


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    nc = sub.add_parser("nats-config", help="write a nats-server configuration (JetStream, hub user, sites)")
    nc.add_argument("--dir", required=True, type=Path)
    nc.add_argument("--host", default="0.0.0.0")
    nc.add_argument("--port", type=int, default=4222)
    nc.add_argument("--store-dir", type=Path, help="JetStream store (default: DIR/jetstream)")
    nc.add_argument(
        "--server-name",
        help="the server's name (default: kamaji-broker); every node of a cluster needs its own",
    )
    nc.add_argument(
        "--config-file",
        default=natsserver.MAIN_FILE,
        metavar="NAME",
        help=f"the configuration's file name in DIR (default: {natsserver.MAIN_FILE}); nodes of a "
        "cluster on one host each get their own, beside the one auth.conf they share",
    )
    nc.add_argument(
        "--monitor", metavar="HOST:PORT", help="serve nats-server's HTTP monitoring here (/varz, /healthz)"
    )
    nc.add_argument("--prefix", default=subjects.DEFAULT_PREFIX, help="subject prefix (default: kb)")
    nc.add_argument(
        "--auth",
        choices=("operator", "static"),
        default="operator",
        help="operator (the default): NATS decentralized auth, JWTs minted by the hub, sites added "
        "and revoked with no file edited and no reload (keys in DIR/operator/, the hub's in DIR/hub/); "
        "static: NKey users listed in auth.conf, re-rendered and reloaded on every site change "
        "(earlier releases)",
    )
    _add_operator_flags(nc)
    _add_cluster_flags(nc)
    _add_tls_flags(nc)


def _add_operator_flags(nc: argparse.ArgumentParser) -> None:
    nc.add_argument(
        "--observer-lifetime",
        type=durations.parse,
        default=credentials.DEFAULT_OBSERVER_LIFETIME.total_seconds(),
        metavar="DURATION",
        help="operator mode: how long observer.creds (kamaji-broker status's read-only user) is valid "
        "(default 24h; `kamaji-broker observer issue` signs it again, `observer revoke` ends it)",
    )
    nc.add_argument(
        "--rotate-signing-key",
        choices=("operator", "account"),
        action="append",
        default=[],
        help="operator mode: a new signing key of the operator (re-signs the account) or of the "
        "account (mints every user); the old one stays trusted until --retire-previous-signing-keys "
        "(deploy/README.md, 'NATS operator and account keys')",
    )
    nc.add_argument(
        "--retire-previous-signing-keys",
        action="store_true",
        help="operator mode: stop trusting the signing keys rotated out (what they signed stops working)",
    )


def _add_cluster_flags(nc: argparse.ArgumentParser) -> None:
    cl = nc.add_argument_group(
        "cluster",
        "make this server one node of a JetStream cluster (run nats-config once per node, each with "
        "its own --server-name, --store-dir and ports); with TLS the routes are mutual TLS with the "
        "server certificate, which must name the route hosts (--tls-host)",
    )
    cl.add_argument("--cluster-name", metavar="NAME", help="the cluster's name, the same on every node")
    cl.add_argument("--cluster-listen", metavar="HOST:PORT", help="where this node accepts routes")
    cl.add_argument(
        "--routes",
        metavar="URL[,URL...]",
        help="every node's route URL, nats://HOST:PORT of its --cluster-listen (this node's own is ignored)",
    )


def _add_tls_flags(nc: argparse.ArgumentParser) -> None:
    tls = nc.add_argument_group(
        "TLS", "clients (hub, agents) must use TLS and verify the server with the CA file (--nats-ca-file)"
    )
    tls.add_argument(
        "--tls-generate",
        metavar="TLS_DIR",
        type=Path,
        help="make (or keep) a CA and a server certificate in TLS_DIR: "
        "ca.crt, ca.key, server.crt, server.key",
    )
    tls.add_argument(
        "--tls-host",
        action="append",
        default=[],
        metavar="NAME",
        help="with --tls-generate: a DNS name or IP address clients connect to (repeatable; "
        "127.0.0.1 and localhost are always included)",
    )
    tls.add_argument("--tls-cert", type=Path, help="the server certificate (PEM) of your own CA")
    tls.add_argument("--tls-key", type=Path, help="its private key (PEM, unencrypted)")
    tls.add_argument(
        "--tls-ca", type=Path, help="the CA that signed --tls-cert (checked; clients verify with it)"
    )


def _tls(args: argparse.Namespace) -> tlsfiles.Paths | None:
    """The TLS files of ``nats-config``: generated, brought by the operator, or none."""
    own = (args.tls_cert, args.tls_key, args.tls_ca)
    if args.tls_generate is not None:
        if any(own):
            raise ValueError("give either --tls-generate or --tls-cert/--tls-key/--tls-ca, not both")
        return tlsfiles.generate(args.tls_generate, hosts=args.tls_host)
    if args.tls_host:
        raise ValueError("--tls-host names hosts of a generated certificate: it needs --tls-generate")
    if args.tls_ca is not None and (args.tls_cert is None or args.tls_key is None):
        raise ValueError("--tls-ca needs --tls-cert and --tls-key")
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ValueError("give both --tls-cert and --tls-key")
    if args.tls_cert is None:
        return None
    return tlsfiles.Paths(cert=args.tls_cert, key=args.tls_key, ca=args.tls_ca)


def _cluster(args: argparse.Namespace) -> serverconf.Cluster | None:
    """The cluster flags: all three or none; a node of a cluster must be named."""
    given = {
        "--cluster-name": args.cluster_name,
        "--cluster-listen": args.cluster_listen,
        "--routes": args.routes,
    }
    if not any(given.values()):
        return None
    missing = [flag for flag, value in given.items() if not value]
    if missing:
        raise ValueError(
            f"a cluster node needs --cluster-name, --cluster-listen and --routes: {', '.join(missing)}"
        )
    if args.server_name is None:
        raise ValueError(
            "every node of a cluster needs its own --server-name (JetStream tells the nodes apart by it)"
        )
    routes = tuple(u.strip() for u in args.routes.split(",") if u.strip())
    return serverconf.Cluster(name=args.cluster_name, listen=args.cluster_listen, routes=routes)


def _rotate(args: argparse.Namespace) -> None:
    """``--rotate-signing-key`` / ``--retire-previous-signing-keys``, before the files are written."""
    if not (args.rotate_signing_key or args.retire_previous_signing_keys):
        return
    if args.auth != "operator" or not natsserver.operator_mode(args.dir):
        raise ValueError(
            f"--rotate-signing-key and --retire-previous-signing-keys need {args.dir} in operator mode"
        )
    if args.rotate_signing_key and args.retire_previous_signing_keys:
        raise ValueError(
            "rotate first, retire later: give --rotate-signing-key or --retire-previous-signing-keys"
        )
    for role in args.rotate_signing_key:
        new = rotation.rotate(args.dir, role)
        print(f"new {role} signing key {new}; the previous one stays trusted until retired", file=sys.stderr)
    if args.retire_previous_signing_keys:
        gone = rotation.retire_previous(args.dir)
        print(f"retired signing keys: {', '.join(gone) or 'none'}", file=sys.stderr)
    print(
        f"next: give the hub {args.dir / operator.HUB_DIR} again (it pushes the account at its start)"
        + (
            "; update operator.conf on every server and restart them one by one"
            if "operator" in args.rotate_signing_key or args.retire_previous_signing_keys
            else ""
        ),
        file=sys.stderr,
    )


def run(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be between 1 and 65535, got {args.port}")
    _rotate(args)
    cluster = _cluster(args)
    tls = _tls(args)
    main, hub = natsserver.nats_config(
        args.dir,
        host=args.host,
        port=args.port,
        store_dir=args.store_dir,
        server_name=args.server_name or "kamaji-broker",
        prefix=args.prefix,
        monitor=args.monitor,
        tls=tls,
        cluster=cluster,
        config_file=args.config_file,
        auth=args.auth,
        observer_lifetime=dt.timedelta(seconds=args.observer_lifetime),
    )
    if hub is not None:
        print(f"wrote {main}; hub NKey {hub.public_key}, seed {hub.seed_file}", file=sys.stderr)
    else:
        d = args.dir / operator.KEYS_DIR
        print(
            f"wrote {main} (operator mode); give the hub the directory {args.dir / operator.HUB_DIR} "
            f"(--nats-operator-dir); keep {d / 'operator.nk'}, {d / 'account.nk'} and "
            f"{d / 'system.nk'} offline",
            file=sys.stderr,
        )
    if cluster is not None:
        print(
            f"cluster {cluster.name}: routes on {cluster.listen}, to {', '.join(cluster.routes)}"
            + ("; mutual TLS between the nodes" if tls is not None else "; routes in plaintext"),
            file=sys.stderr,
        )
    if tls is None:
        print(
            "warning: no TLS (--tls-generate or --tls-cert/--tls-key): traffic is plaintext", file=sys.stderr
        )
    else:
        ca = tls.ca if tls.ca is not None else "the CA that signed --tls-cert"
        print(f"TLS: {tls.cert}; hub and agents verify it with --nats-ca-file {ca}", file=sys.stderr)
    print(f"start it with: nats-server -c {main}", file=sys.stderr)
    return 0
