"""``kamaji-broker status``: the whole fleet on one screen, from the management cluster and the bus.

Reads every Site and RemoteKamajiControlPlane (``--kubeconfig``: it needs list on both, and
watch with ``--watch``, nothing else) and, with ``--nats-url``, each site's backlog, the hub's
lag and the latest heartbeat from the bus with the observer's read-only credential
(``nats-config`` writes it: ``observer.creds`` in operator mode, ``observer.nk`` with static
users). Prints every site (connected, heartbeat
age, backlog, agent version, trusted hub key ids, control planes by phase), every control plane
that is not Ready with why, and the problems; ``-o json`` for scripts.

With ``--watch`` it keeps the fleet on screen until Ctrl-C (``fleet.screen``: redrawn in place
on a terminal, one line per event otherwise; ``-o json``: one JSON object per line per look),
kept by watching the management cluster (``fleet.watching``: one list, then watch events) and
reading the bus every ``--heartbeat-interval`` seconds: it costs next to nothing at rest, where
looking again and again would list every object each time.

Exit codes: 0 healthy; 1 something is unhealthy (a site disconnected or refusing the hub's key,
the hub not updating, a control plane not Ready, the bus unreadable) or the management cluster
cannot be read; 2 a flag is wrong. With ``--watch``, on Ctrl-C, those of the last look.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import yaml

from common import bus
from common.bus import errors as bus_errors
from common.kube import Kube, connect
from common.kube import errors as kube_errors
from fleet import reading, screen, verdicts, view, watching
from hub.ingest.liveness import HEARTBEAT_INTERVAL
from protocol import errors as protocol_errors
from protocol import natsjwt, permissions, subjects
from protocol.streams import MISSED_HEARTBEATS


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    st = sub.add_parser(
        "status",
        help="every site and every control plane not Ready, from the management cluster and the bus",
        description="One screen for the whole fleet: sites (connected, heartbeat age, backlog, agent "
        "version, trusted key ids, control planes by phase), control planes that are not Ready and "
        "why, and the problems. Exit code 1 when something is unhealthy.",
    )
    st.add_argument(
        "--kubeconfig",
        type=Path,
        help="kubeconfig of the management cluster (default: the first file of $KUBECONFIG, else "
        "~/.kube/config)",
    )
    st.add_argument("--nats-url", help="NATS URL(s), comma separated; without it the bus is not read")
    identity = st.add_mutually_exclusive_group()
    identity.add_argument(
        "--nats-creds", type=Path, help="the observer's .creds (nats-config: observer.creds)"
    )
    identity.add_argument(
        "--nats-seed", type=Path, help="the observer's NKey seed (static users: observer.nk)"
    )
    st.add_argument("--nats-ca-file", type=Path, help="CA certificate (PEM) the NATS server must chain to")
    st.add_argument(
        "--nats-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long to keep trying to reach the bus before reporting it unreachable (default: 10)",
    )
    st.add_argument("--prefix", default=subjects.DEFAULT_PREFIX, help="subject prefix (default: kb)")
    st.add_argument(
        "--heartbeat-interval",
        type=float,
        default=HEARTBEAT_INTERVAL,
        metavar="SECONDS",
        help=f"the heartbeat interval of agents whose heartbeats do not say theirs (older agents); a "
        f"heartbeat {MISSED_HEARTBEATS} intervals old means the agent is gone (default: "
        f"{HEARTBEAT_INTERVAL:g}; an agent that says its interval is judged by it)",
    )
    st.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")
    st.add_argument(
        "--watch",
        action="store_true",
        help="keep the fleet on screen until Ctrl-C, watching the management cluster and reading the "
        "bus every --heartbeat-interval seconds (redrawn in place on a terminal, one line per event "
        "otherwise; with -o json one object per line per look)",
    )


def _bus_options(args: argparse.Namespace) -> bus.Options:
    servers = tuple(u.strip() for u in str(args.nats_url).split(",") if u.strip())
    if not servers:
        raise ValueError("--nats-url: give at least one URL")
    if args.nats_creds is None and args.nats_seed is None:
        raise ValueError("--nats-url needs the observer's identity: --nats-creds or --nats-seed")
    return bus.Options(
        servers=servers,
        creds_file=args.nats_creds,
        seed_file=args.nats_seed,
        ca_file=args.nats_ca_file,
        inbox_prefix=permissions.OBSERVER_INBOX,
        name="kamaji-broker-status",
    )


def _expired(creds: Path | None) -> str:
    """Why the observer's ``.creds`` can no longer get in ("" if it may): said plainly, where
    the server would only answer "authorization violation"."""
    if creds is None:
        return ""
    try:
        claims = natsjwt.decode(natsjwt.jwt_of_creds(creds.read_text()), now=0)
    except (OSError, protocol_errors.JWTError):
        return ""  # the connection says what is wrong with it
    if not claims.exp or claims.exp > time.time():
        return ""
    when = dt.datetime.fromtimestamp(claims.exp, dt.UTC).isoformat().replace("+00:00", "Z")
    return (
        f"the bus: the observer's credential {creds} expired at {when}: sign it again "
        "(`kamaji-broker observer issue --nats-config-dir DIR`)"
    )


async def _open_bus(args: argparse.Namespace) -> tuple[bus.Connection | None, list[str]]:
    if args.nats_url is None:
        return None, []
    options = _bus_options(args)
    expired = _expired(args.nats_creds)
    if expired:
        return None, [expired]
    try:
        return await bus.connect(options, deadline=args.nats_timeout), []
    except bus_errors.BusError as exc:
        return None, [f"the bus: {exc}"]


def _default_kubeconfig() -> Path:
    first = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    return Path(first) if first else Path.home() / ".kube" / "config"


async def _kube(path: Path) -> Kube:
    try:
        return await connect(in_cluster=False, kubeconfig=path)
    # kubernetes_asyncio reports a file that is not a kubeconfig in many ways.
    except (kube_errors.KubeError, yaml.YAMLError, TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ValueError(f"--kubeconfig {path}: not a usable kubeconfig: {exc}") from None


def check(args: argparse.Namespace) -> Path:
    """The flags that cannot work, each named; the kubeconfig to read."""
    if args.nats_timeout <= 0:
        raise ValueError(f"--nats-timeout must be more than 0 seconds, got {args.nats_timeout:g}")
    if args.heartbeat_interval <= 0:
        raise ValueError(f"--heartbeat-interval must be more than 0 seconds, got {args.heartbeat_interval:g}")
    try:
        subjects.check_prefix(args.prefix)
    except protocol_errors.SubjectError as exc:
        raise ValueError(f"--prefix {args.prefix!r}: {exc}") from None
    if args.nats_url is not None:
        _bus_options(args)
    kubeconfig: Path = args.kubeconfig or _default_kubeconfig()
    if not kubeconfig.is_file():
        raise FileNotFoundError(f"--kubeconfig {kubeconfig}: no such file")
    return kubeconfig


async def read(args: argparse.Namespace, kubeconfig: Path) -> verdicts.Fleet:
    kube = await _kube(kubeconfig)
    conn, notes = await _open_bus(args)
    try:
        return await reading.read(
            kube,
            conn,
            prefix=args.prefix,
            stale_after=MISSED_HEARTBEATS * args.heartbeat_interval,
            notes=notes,
        )
    finally:
        await kube.close()
        if conn is not None:
            with contextlib.suppress(bus_errors.BusError):
                await conn.close()


def render(f: verdicts.Fleet, *, output: str) -> str:
    if output == "json":
        return json.dumps(view.to_json(f), indent=2)
    verdict = "healthy" if f.healthy else f"UNHEALTHY: {view.counted(len(f.problems()), 'problem')}"
    if f.bus:
        source = "management cluster and bus"
    else:
        source = "management cluster only: " + ("the bus could not be read" if f.notes else "no --nats-url")
    # Ready: what the PHASE of a control plane says (fleet.controlplanes), nothing looser.
    cps = f"{f.ready}/{len(f.control_planes)} control planes Ready"
    head = f"kamaji-broker status: {view.counted(len(f.sites), 'site')}, {cps}; "
    lines = [head + verdict, f"  (read from the {source})", "", *view.table(f)]
    return "\n".join(view.printable(lines))


def _watcher(args: argparse.Namespace, kube: Kube, conn: bus.Connection | None) -> watching.Watcher:
    stale_after = MISSED_HEARTBEATS * args.heartbeat_interval
    scope = watching.Scope(prefix=args.prefix, stale_after=stale_after)
    return watching.Watcher(kube, conn, scope=scope, pace=watching.Pace(bus=args.heartbeat_interval))


async def _looks(w: watching.Watcher, stop: asyncio.Event, show: Callable[[verdicts.Fleet], None]) -> int:
    """Show each look ``w`` hands out until ``stop``; the exit code of the last."""
    code = 1  # nothing seen: the management cluster could not be read
    stopping = asyncio.create_task(stop.wait())
    try:
        while not stop.is_set():
            looking = asyncio.create_task(w.next())
            await asyncio.wait({looking, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not looking.done():
                looking.cancel()
                break
            f = looking.result()
            assert f is not None  # no timeout
            show(f)
            code = 0 if f.healthy else 1
    finally:
        stopping.cancel()
    return code


async def follow(args: argparse.Namespace, kubeconfig: Path, out: TextIO) -> int:
    """``--watch``: every look until Ctrl-C (or SIGTERM)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    kube = await _kube(kubeconfig)
    conn, notes = await _open_bus(args)
    w = _watcher(args, kube, conn)
    w.notes = tuple(notes)
    drawn = screen.Screen(out, title="kamaji-broker status")
    began = loop.time()

    def show(f: verdicts.Fleet) -> None:
        if args.output == "json":
            out.write(json.dumps(view.to_json(f)) + "\n")
            out.flush()
        else:
            drawn.show(f, elapsed=loop.time() - began)

    watched = asyncio.create_task(w.run())
    try:
        with drawn.owning():
            return await _looks(w, stop, show)
    finally:
        watched.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watched
        await kube.close()
        if conn is not None:
            with contextlib.suppress(bus_errors.BusError):
                await conn.close()


def run(args: argparse.Namespace) -> int:
    kubeconfig = check(args)
    if args.watch:
        return asyncio.run(follow(args, kubeconfig, sys.stdout))
    f = asyncio.run(read(args, kubeconfig))
    sys.stdout.write(render(f, output=args.output) + "\n")
    return 0 if f.healthy else 1
