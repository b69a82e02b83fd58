"""``kamaji-broker``: argument parsing and dispatch for every subcommand.

Operator tools (``keys``, ``site``, ``nats-config``) act on files; ``hub``, ``agent`` and
``sandbox`` run the long-lived processes. Errors in what the user typed
are reported naming the flag or value, with exit code 2; nothing prints secret material except
``keys generate --print-secret``, which exists to do exactly that (to stdout only).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from agent.settings import AgentSettings
from common import keyfiles, logs, natsconfig, natsfiles, tlsfiles
from common.kube import errors as kube_errors
from hub.settings import HubSettings
from kamaji_broker import __version__, flags, sitefiles
from protocol import errors as protocol_errors
from protocol import subjects


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kamaji-broker",
        description="Run Kamaji control planes in remote sites, driven by Cluster API over NATS JetStream.",
    )
    p.add_argument("--version", action="version", version=f"kamaji-broker {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    hub = sub.add_parser(
        "hub",
        help="run the hub: the Cluster API provider of RemoteKamajiControlPlane, working through NATS",
        description="Every flag can also be set by its environment variable (shown in brackets).",
    )
    flags.add(hub, HubSettings)

    agent = sub.add_parser(
        "agent",
        help="run the site agent: apply intents to TenantControlPlanes, report status and sealed secrets",
        description="Every flag can also be set by its environment variable (shown in brackets).",
    )
    flags.add(agent, AgentSettings)

    sb = sub.add_parser(
        "sandbox",
        help="run the whole system on this machine: NATS, emulated clusters, Kamaji simulators, hub, agents",
        description="Start everything as local processes on 127.0.0.1, create one Cluster + "
        "RemoteKamajiControlPlane per control plane, show progress until all are Ready, print kubectl "
        "commands to look around, then run until Ctrl-C (which stops every process).",
    )
    sb.add_argument("--sites", type=int, default=2, help="number of sites: site-a, site-b, ... (default: 2)")
    sb.add_argument(
        "--control-planes", type=int, default=2, metavar="M", help="control planes per site (default: 2)"
    )
    sb.add_argument(
        "--kamaji-delay",
        type=float,
        default=3.0,
        metavar="SECONDS",
        help="seconds the Kamaji simulators take to make a control plane Ready (default: 3)",
    )
    sb.add_argument(
        "--dir", type=Path, default=Path(".sandbox"), help="working directory (default: .sandbox)"
    )
    sb.add_argument(
        "--exit-when-ready",
        action="store_true",
        help="stop everything and exit 0 once every control plane is Ready and its kubeconfig Secret exists",
    )
    sb.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="seconds after creating the control planes until all must be Ready; past it, "
        "--exit-when-ready exits 1 naming what is missing (default: 300)",
    )

    keys = sub.add_parser("keys", help="hub key pairs (signing and sealing)")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    gen = keys_sub.add_parser("generate", help="create the hub's key pairs (idempotent)")
    gen.add_argument("--out", required=True, type=Path, help="directory for the key files")
    gen.add_argument(
        "--rotate-signing", action="store_true", help="add a new signing key (old one stays trusted)"
    )
    gen.add_argument(
        "--rotate-sealing", action="store_true", help="add a new sealing key (old ones stay usable)"
    )
    gen.add_argument("--print-secret", metavar="NAME", help="print a Kubernetes Secret manifest named NAME")
    gen.add_argument("--namespace", help="namespace of the printed Secret")
    ret = keys_sub.add_parser(
        "retire",
        help="stop trusting a key id for good (after a rotation; deletes a sealing key's private file)",
        description="Remove KID from the keys agents trust and the hub opens, and list it as retired "
        "(agents refuse intents it signed, the hub boxes sealed to it). The current signing and "
        "sealing keys cannot be retired: rotate first. Then redeploy the hub's Secrets and the "
        "agents' hub-public-keys.json (deploy/README.md, 'Key rotation after a compromise').",
    )
    ret.add_argument("kid", metavar="KID", help="the key id (16 hex digits, as `keys generate` prints)")
    ret.add_argument("--out", required=True, type=Path, help="the key directory of `keys generate`")

    site = sub.add_parser("site", help="site onboarding: NATS identity and permissions")
    site_sub = site.add_subparsers(dest="site_command", required=True, metavar="ACTION")
    for action, helptext in (
        ("add", "create or refresh a site's credentials and write its Site manifest"),
        ("remove", "revoke a site"),
    ):
        a = site_sub.add_parser(action, help=helptext)
        a.add_argument("site", help="site name (a DNS-1123 label)")
        a.add_argument("--nats-config-dir", required=True, type=Path)
        a.add_argument("--prefix", default=subjects.DEFAULT_PREFIX, help="subject prefix (default: kb)")
        if action == "add":
            a.add_argument(
                "--namespaces",
                metavar="NS[,NS...]",
                help="management namespaces whose RKCPs may place control planes at the site "
                "(a spec.placements entry of the Site, with --target-namespaces)",
            )
            a.add_argument(
                "--target-namespaces",
                metavar="NS[,NS...]",
                help="namespaces at the site those RKCPs may target (with --namespaces)",
            )
            a.add_argument(
                "--apply",
                metavar="KUBECONFIG",
                type=Path,
                help="also create (or update the spec of) the Site in the management cluster of KUBECONFIG",
            )
    ls = site_sub.add_parser("list", help="list configured sites")
    ls.add_argument("--nats-config-dir", required=True, type=Path)

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
        default=natsfiles.MAIN_FILE,
        metavar="NAME",
        help=f"the configuration's file name in DIR (default: {natsfiles.MAIN_FILE}); nodes of a "
        "cluster on one host each get their own, beside the one auth.conf they share",
    )
    nc.add_argument(
        "--monitor", metavar="HOST:PORT", help="serve nats-server's HTTP monitoring here (/varz, /healthz)"
    )
    nc.add_argument("--prefix", default=subjects.DEFAULT_PREFIX, help="subject prefix (default: kb)")
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
    return p


def _nats_tls(args: argparse.Namespace) -> tlsfiles.Paths | None:
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


def _keys(args: argparse.Namespace) -> int:
    if args.keys_command == "retire":
        return _keys_retire(args)
    result = keyfiles.generate(
        args.out, rotate_signing=args.rotate_signing, rotate_sealing=args.rotate_sealing
    )
    for path in result.created:
        print(f"created {path}", file=sys.stderr)
    print(
        f"signing key id {result.signing_key_id}; sealing key ids {', '.join(result.sealing_key_ids)}",
        file=sys.stderr,
    )
    print(f"agents trust {args.out / keyfiles.PUBLIC_FILE} (--hub-public-keys)", file=sys.stderr)
    if args.print_secret:
        sys.stdout.write(keyfiles.secret_manifest(args.out, name=args.print_secret, namespace=args.namespace))
    return 0


def _keys_retire(args: argparse.Namespace) -> int:
    retired = keyfiles.retire(args.out, args.kid)
    for path in retired.removed:
        print(f"deleted {path}", file=sys.stderr)
    state = "was already retired" if retired.already else "retired"
    print(f"{retired.use} key id {retired.key_id} {state}", file=sys.stderr)
    print(
        f"it takes effect as the hub's key Secrets and every agent's {keyfiles.PUBLIC_FILE} are "
        f"redeployed from {args.out} (deploy/README.md: 'Key rotation after a compromise')",
        file=sys.stderr,
    )
    return 0


def _site(args: argparse.Namespace) -> int:
    config_dir: Path = args.nats_config_dir
    if args.site_command == "list":
        for identity in natsfiles.site_list(config_dir):
            print(f"{identity.name}\t{identity.public_key}")
        return 0
    if args.site_command == "add":
        placements = sitefiles.placements(args.namespaces, args.target_namespaces)
        identity = natsfiles.site_add(config_dir, args.site, prefix=args.prefix)
        print(f"site {identity.name}: NKey {identity.public_key}", file=sys.stderr)
        print(f"agent seed file (give it to this site's agent only): {identity.seed_file}", file=sys.stderr)
        manifest = sitefiles.write(identity.seed_file.parent, args.site, placements=placements)
        print(f"Site manifest for the management cluster: kubectl apply -f {manifest}", file=sys.stderr)
        if args.apply is not None:
            done = asyncio.run(sitefiles.apply(args.apply, args.site, placements=placements))
            print(f"Site {args.site} {done} in the management cluster", file=sys.stderr)
    else:
        natsfiles.site_remove(config_dir, args.site, prefix=args.prefix)
        sitefiles.remove(config_dir / natsfiles.SITES_DIR, args.site)
        print(f"site {args.site} removed", file=sys.stderr)
        print(
            f"delete its Site in the management cluster too: kubectl delete site {args.site}", file=sys.stderr
        )
    print("reload the server to apply: nats-server --signal reload", file=sys.stderr)
    return 0


def _nats_cluster(args: argparse.Namespace) -> natsconfig.Cluster | None:
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
    return natsconfig.Cluster(name=args.cluster_name, listen=args.cluster_listen, routes=routes)


def _nats_config(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be between 1 and 65535, got {args.port}")
    cluster = _nats_cluster(args)
    tls = _nats_tls(args)
    main, hub = natsfiles.nats_config(
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
    )
    print(f"wrote {main}; hub NKey {hub.public_key}, seed {hub.seed_file}", file=sys.stderr)
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


def _agent(args: argparse.Namespace) -> int:
    from agent import main as agent_main

    settings = flags.load(AgentSettings, args)
    logs.configure(level=os.environ.get("KB_LOG_LEVEL", "info"))
    asyncio.run(agent_main.run(settings))
    return 0


def _hub(args: argparse.Namespace) -> int:
    from hub import main as hub_main

    settings = flags.load(HubSettings, args)
    logs.configure(level=os.environ.get("KB_LOG_LEVEL", "info"))
    asyncio.run(hub_main.run(settings))
    return 0


def _sandbox(args: argparse.Namespace) -> int:
    # Imported here: only this command needs the sandbox (and its nats-server wheel).
    from sandbox import run

    options = run.Options(
        directory=args.dir,
        sites=args.sites,
        control_planes=args.control_planes,
        kamaji_delay=args.kamaji_delay,
        exit_when_ready=args.exit_when_ready,
        timeout=args.timeout,
    )
    return run.main(options)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    handlers = {
        "keys": _keys,
        "site": _site,
        "nats-config": _nats_config,
        "sandbox": _sandbox,
        "agent": _agent,
        "hub": _hub,
    }
    try:
        return handlers[args.command](args)
    except flags.SettingsError as exc:
        for line in str(exc).splitlines():
            print(f"kamaji-broker {args.command}: error: {line}", file=sys.stderr)
        return 2
    except kube_errors.KubeError as exc:
        print(f"kamaji-broker {args.command}: error: the management cluster: {exc}", file=sys.stderr)
        return 1
    except (protocol_errors.ProtocolError, ValueError, FileNotFoundError) as exc:
        print(f"kamaji-broker {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
