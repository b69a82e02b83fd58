"""``kamaji-broker site add|remove|list``: a site's NATS identity and permissions
(``common.files.natsserver``) and its Site object for the management cluster (``kamaji_broker.sitefiles``).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
from pathlib import Path

from common import durations
from common.files import natsserver
from kamaji_broker import sitefiles
from protocol import credentials, natsjwt, subjects


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
            _add_placement_flags(a)
            a.add_argument(
                "--bootstrap-lifetime",
                type=durations.parse,
                default=credentials.DEFAULT_BOOTSTRAP_LIFETIME.total_seconds(),
                metavar="DURATION",
                help="operator mode: how long the bootstrap credential may be used, once (default 1h)",
            )
        else:
            a.add_argument(
                "--apply",
                metavar="KUBECONFIG",
                type=Path,
                help="also delete the Site in the management cluster of KUBECONFIG (in operator mode the "
                "hub then revokes the site's agent at once)",
            )
    ls = site_sub.add_parser("list", help="list configured sites")
    ls.add_argument("--nats-config-dir", required=True, type=Path)


def _add_placement_flags(a: argparse.ArgumentParser) -> None:
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


def run(args: argparse.Namespace) -> int:
    config_dir: Path = args.nats_config_dir
    if args.site_command == "list":
        for identity in natsserver.site_list(config_dir):
            print(f"{identity.name}\t{identity.public_key}")
        return 0
    if args.site_command == "add":
        _add(args, config_dir)
    else:
        _remove(args, config_dir)
    if not natsserver.operator_mode(config_dir):
        print("reload the server to apply: nats-server --signal reload", file=sys.stderr)
    return 0


def _remove(args: argparse.Namespace, config_dir: Path) -> None:
    natsserver.site_remove(config_dir, args.site, prefix=args.prefix)
    sitefiles.remove(config_dir / natsserver.SITES_DIR, args.site)
    print(f"site {args.site} removed", file=sys.stderr)
    if args.apply is not None:
        done = asyncio.run(sitefiles.delete(args.apply, args.site))
        print(f"Site {args.site} {done} in the management cluster", file=sys.stderr)
    else:
        print(
            f"delete its Site in the management cluster too: kubectl delete site {args.site}", file=sys.stderr
        )
    if natsserver.operator_mode(config_dir):
        print("operator mode: the hub revokes the site's agent when its Site is deleted", file=sys.stderr)


def _add(args: argparse.Namespace, config_dir: Path) -> None:
    placements = sitefiles.placements(args.namespaces, args.target_namespaces)
    bootstrap_jwt = ""
    if natsserver.operator_mode(config_dir):
        lifetime = dt.timedelta(seconds=args.bootstrap_lifetime)
        if lifetime > credentials.DEFAULT_LIFETIME:
            raise ValueError(
                f"--bootstrap-lifetime {lifetime} is longer than a site credential's "
                f"({credentials.DEFAULT_LIFETIME}), which is how long the hub keeps revocations"
            )
        boot = natsserver.site_bootstrap(config_dir, args.site, lifetime=lifetime, prefix=args.prefix)
        print(
            f"site {args.site}: bootstrap credential {boot} (single use, valid {lifetime}); give it to "
            "this site's agent (--nats-bootstrap-creds): it makes its own key and asks the hub for "
            "its credential. Nothing changes on the NATS servers.",
            file=sys.stderr,
        )
        directory = boot.parent
        bootstrap_jwt = natsjwt.jwt_of_creds(boot.read_text())
    else:
        identity = natsserver.site_add(config_dir, args.site, prefix=args.prefix)
        print(f"site {identity.name}: NKey {identity.public_key}", file=sys.stderr)
        print(f"agent seed file (give it to this site's agent only): {identity.seed_file}", file=sys.stderr)
        directory = identity.seed_file.parent
    manifest = sitefiles.write(directory, args.site, placements=placements, bootstrap_jwt=bootstrap_jwt)
    print(f"Site manifest for the management cluster: kubectl apply -f {manifest}", file=sys.stderr)
    if args.apply is not None:
        applying = sitefiles.apply(args.apply, args.site, placements=placements, bootstrap_jwt=bootstrap_jwt)
        done = asyncio.run(applying)
        print(f"Site {args.site} {done} in the management cluster", file=sys.stderr)
