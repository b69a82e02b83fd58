"""``kamaji-broker hub|agent|sandbox``: the long-lived processes.

``hub`` and ``agent`` take every field of their settings as a flag (``kamaji_broker.flags``) and
run ``hub.main`` / ``agent.main``; ``sandbox`` runs the whole system on this machine
(``sandbox.run``). Each imports its process only when chosen.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from agent.settings import AgentSettings
from common import logs
from hub.settings import HubSettings
from kamaji_broker import flags

_FLAGS_AND_ENV = "Every flag can also be set by its environment variable (shown in brackets)."


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    hub = sub.add_parser(
        "hub",
        help="run the hub: the Cluster API provider of RemoteKamajiControlPlane, working through NATS",
        description=_FLAGS_AND_ENV,
    )
    flags.add(hub, HubSettings)
    add_verbose(hub)
    agent = sub.add_parser(
        "agent",
        help="run the site agent: apply intents to TenantControlPlanes, report status and sealed secrets",
        description=_FLAGS_AND_ENV,
    )
    flags.add(agent, AgentSettings)
    add_verbose(agent)
    _add_sandbox(sub)


def add_verbose(parser: argparse.ArgumentParser) -> None:
    # A count, not a setting: how much to say is asked for by a person at a terminal (as
    # kubectl's -v), while KB_LOG_LEVEL stays the deployment's knob; given, -v wins over it.
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="-v: debug lines of kamaji-broker; -vv: also of nats, aiohttp and asyncio "
        "(never kubernetes_asyncio's, which would show Secrets); wins over KB_LOG_LEVEL",
    )


def _configure_logs(args: argparse.Namespace, log_format: logs.Format) -> None:
    logs.configure(
        level=os.environ.get("KB_LOG_LEVEL", "info"), log_format=log_format, verbosity=args.verbose
    )


KAMAJI_HELP = (
    "what reconciles the TenantControlPlanes at each site: the simulator (default) or the real Kamaji "
    "operator with kwok, an etcd DataStore and a tenant API server per control plane (needs "
    "--kubernetes real, root and iproute2: each site is a network namespace)"
)


def _add_sandbox(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    sb.add_argument(
        "--topology",
        action="store_true",
        help="create Clusters of the ClusterClass kamaji-broker (deploy/templates/) instead of Cluster + "
        "RKCP pairs; a topology simulator stands in for CAPI's topology controller",
    )
    _add_backends(sb)
    _add_print(sb)


def _add_backends(sb: argparse.ArgumentParser) -> None:
    sb.add_argument(
        "--kubernetes",
        choices=("emulator", "real"),
        default="emulator",
        help="what runs each cluster: the emulator (default: one light process each) or real etcd, "
        "kube-apiserver and kube-controller-manager (built by `make kube-binaries`)",
    )
    sb.add_argument("--kamaji", choices=("simulator", "real"), default="simulator", help=KAMAJI_HELP)
    sb.add_argument(
        "--capi",
        choices=("stand-in", "real"),
        default=None,
        help="what plays Cluster API: Cluster API's own controllers, installed with clusterctl init "
        "(needs --kubernetes real; its default there) or the sandbox's stand-in (the emulator's default)",
    )


def _add_print(sb: argparse.ArgumentParser) -> None:
    sb.add_argument(
        "--print-cluster",
        metavar="NAME",
        help="start nothing: print what `clusterctl generate cluster NAME` prints from deploy/templates/ "
        "with this sandbox's values (with --topology the ClusterClass first), to apply with kubectl",
    )
    sb.add_argument(
        "--at",
        metavar="SITE",
        help="the site --print-cluster places it at (default: site-a)",
    )


def agent(args: argparse.Namespace) -> int:
    from agent import main as agent_main

    settings = flags.load(AgentSettings, args)
    _configure_logs(args, settings.log_format)
    asyncio.run(agent_main.run(settings))
    return 0


def hub(args: argparse.Namespace) -> int:
    from common import service
    from hub import main as hub_main

    settings = flags.load(HubSettings, args)
    _configure_logs(args, settings.log_format)
    try:
        asyncio.run(hub_main.run(settings))
    except service.Ended as exc:  # it cannot go on (its NATS connection closed for good): a new process can
        print(f"kamaji-broker hub: error: {exc}", file=sys.stderr)
        return 1
    return 0


def sandbox(args: argparse.Namespace) -> int:
    # Imported here: only this command needs the sandbox (and its nats-server wheel).
    from sandbox import hints, run

    capi = args.capi or ("real" if args.kubernetes == "real" else "stand-in")
    options = run.Options(
        directory=args.dir,
        sites=args.sites,
        control_planes=args.control_planes,
        kamaji_delay=args.kamaji_delay,
        kubernetes=args.kubernetes,
        kamaji=args.kamaji,
        capi=capi,
        exit_when_ready=args.exit_when_ready,
        timeout=args.timeout,
        topology=args.topology,
    )  # a ValueError names the flag: kamaji_broker.cli prints it
    if args.print_cluster is not None:
        site = args.at or "site-a"
        print(
            hints.generated_yaml(
                args.print_cluster, site=site, sites=args.sites, topology=args.topology, capi=capi
            ),
            end="",
        )
        return 0
    if args.at is not None:
        raise ValueError(f"--at {args.at} places what --print-cluster prints: add --print-cluster NAME")
    return run.main(options)
