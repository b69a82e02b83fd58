"""``kamaji-broker sandbox``: the whole system on this machine, with live progress, until Ctrl-C.

Owns the command's behaviour: start the ``sandbox.launcher.System`` (NATS, emulated clusters,
Kamaji simulators, hub, agents as processes) and the topology simulator ``sandbox.capi`` (CAPI's
topology controller's stand-in, for ClusterClass-based Clusters), create one Cluster +
RemoteKamajiControlPlane per control plane from ``deploy/templates/cluster-template.yaml`` (with
``--topology``: one Cluster of the ClusterClass ``kamaji-broker`` each, whose RKCP the simulator
makes), show the live view (``sandbox.progress``: a table redrawn in place on a terminal, one
line per event otherwise; the bus read with the observer's credential, as ``kamaji-broker
status`` reads it), print copy-pasteable ``kubectl`` and ``kamaji-broker status`` commands once
every control plane is Ready with its ``<cluster>-kubeconfig`` Secret, then keep the view live
until Ctrl-C (or exit at once with ``--exit-when-ready``): upgrades, deletions, disconnects and
rejections show as they happen.
Whatever happens (Ctrl-C, SIGTERM, a timeout, a crashed process), every process it started is
stopped before it returns.

Exit codes: 0 ready (or stopped by the user after start-up), 1 not ready within ``--timeout``
or a part failed, 130 interrupted before Ready with ``--exit-when-ready``.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from common import bus
from common.bus import errors as bus_errors
from common.kube import errors as kerrors
from fleet import verdicts, view, watching
from protocol import permissions
from sandbox import hints, launcher, natsd, processes, progress
from sandbox.capi import controller
from sandbox.launcher import workload

__all__ = ["Options", "main"]

POLL = 0.5
"""Seconds the live view waits for a look (``fleet.watching``: one comes when something changed)
before it checks on its processes again."""


HEARTBEAT = 2.0
"""Seconds between the agents' heartbeats in the sandbox (see ``_session``)."""


@dataclass(frozen=True, kw_only=True)
class Options:
    directory: Path = Path(".sandbox")
    sites: int = 2
    control_planes: int = 2
    """Per site."""
    kamaji_delay: float = 3.0
    kubernetes: str = "emulator"
    """What runs the clusters: ``sandbox.launcher.options.KUBERNETES``."""
    kamaji: str = "simulator"
    """What reconciles each site's TenantControlPlanes: ``sandbox.launcher.options.KAMAJI``."""
    exit_when_ready: bool = False
    timeout: float = 300.0
    """Seconds from the creation of the control planes until all must be Ready (start-up has
    its own deadlines, so a slow start never reads as a slow broker)."""
    capi: str = "stand-in"
    """What plays Cluster API: ``sandbox.launcher.options.CAPI`` (``--capi``; real with
    ``--kubernetes real`` unless asked otherwise: ``processes.sandbox``)."""
    topology: bool = False
    """Clusters of the ClusterClass ``kamaji-broker`` (``spec.topology``) instead of Cluster + RKCP."""

    def __post_init__(self) -> None:
        if self.kamaji == "real" and self.kubernetes != "real":
            raise ValueError("--kamaji real runs on real clusters: add --kubernetes real")
        if self.capi == "real" and self.kubernetes != "real":
            raise ValueError(
                "--capi real runs Cluster API's own controllers on real clusters: add --kubernetes real"
            )
        if self.sites < 1 or self.sites > 255:
            raise ValueError(f"--sites must be between 1 and 255, got {self.sites}")
        if self.control_planes < 0:
            raise ValueError(f"--control-planes must be 0 or more, got {self.control_planes}")
        if self.kamaji_delay < 0:
            raise ValueError(f"--kamaji-delay must be 0 or more seconds, got {self.kamaji_delay:g}")
        if self.timeout <= 0:
            raise ValueError(f"--timeout must be more than 0 seconds, got {self.timeout:g}")


async def _create(t: launcher.System, options: Options) -> None:
    """Ask for every control plane, as a CAPI user would."""
    for name, site in workload.control_plane_names(t.sites, per_site=options.control_planes):
        if options.topology:
            await t.create_topology_cluster(name, site=site)
        else:
            await t.create_control_plane(name, site=site)


async def _observe(t: launcher.System) -> bus.Connection:
    """The bus as ``kamaji-broker status`` reads it: the observer's read-only credential."""
    options = bus.Options(
        servers=t.nats_urls,
        creds_file=t.observer_credential(),
        ca_file=t.nats_ca_file,
        inbox_prefix=permissions.OBSERVER_INBOX,
        name="kamaji-broker-sandbox-view",
    )
    return await bus.connect(options, deadline=30)


async def _watch(
    t: launcher.System, options: Options, screen: progress.Screen, stop: asyncio.Event, conn: bus.Connection
) -> int:
    """The live view until Ctrl-C: the fleet kept by watching (``fleet.watching``), each look shown."""
    watcher = t.watcher(conn)
    watched = asyncio.create_task(watcher.run())
    try:
        return await _follow(t, options, screen, stop, watcher)
    finally:
        watched.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watched


async def _follow(
    t: launcher.System,
    options: Options,
    screen: progress.Screen,
    stop: asyncio.Event,
    watcher: watching.Watcher,
) -> int:
    loop = asyncio.get_running_loop()
    began = loop.time()
    deadline = began + options.timeout
    ready = warned = False
    snapshot: verdicts.Fleet | None = None
    while not stop.is_set():
        failures = t.failures()
        if failures:
            screen.freeze()
            for line in view.printable(failures):
                print(f"kamaji-broker sandbox: error: {line}", file=sys.stderr)
            return 1
        # A look when something changed (or every few seconds, for the ages); None meanwhile.
        look = await watcher.next(timeout=POLL)
        now = loop.time()
        if look is not None:
            snapshot = look
            # Live until Ctrl-C: upgrades, deletions, disconnects after Ready show too.
            screen.show(snapshot, elapsed=now - began)
        if (
            look is not None
            and not ready
            and progress.ready(look, expected=options.control_planes * len(t.sites))
        ):
            ready = True
            screen.freeze()
            staying = not options.exit_when_ready
            hints.print_ready(
                t, look, screen, elapsed=now - began, staying=staying, topology=options.topology
            )
            if options.exit_when_ready:
                return 0
        if snapshot is not None and not ready and now > deadline and not warned:
            if _late(t, options, screen, snapshot):
                return 1
            warned = True
        # Signed again at half its lifetime: when the server drops the view's connection at the
        # old one's expiry, the reconnect presents this one.
        t.observer_credential()
    return 130 if options.exit_when_ready and not ready else 0


def _late(t: launcher.System, options: Options, screen: progress.Screen, snapshot: verdicts.Fleet) -> bool:
    """Say why the sandbox is not Ready after ``--timeout``; whether to give up (``--exit-when-ready``)."""
    screen.freeze()
    message = progress.not_ready(
        snapshot, timeout=options.timeout, errors=t.recent_errors(), logs_dir=t.logs_dir
    )
    print(f"kamaji-broker sandbox: {'error' if options.exit_when_ready else 'warning'}: {message}",
          file=sys.stderr)  # fmt: skip
    return options.exit_when_ready


async def _work(t: launcher.System, options: Options, screen: progress.Screen, stop: asyncio.Event) -> int:
    """On the started system: the topology simulator beside (unless Cluster API's own
    controllers run), the control planes, their progress."""

    def report(message: str) -> None:
        screen.warn(f"kamaji-broker sandbox: topology simulator: {message}")

    simulating = asyncio.create_task(
        controller.run(t.mgmt, stop=stop, report=report) if options.capi == "stand-in" else stop.wait()
    )
    n = options.control_planes * len(t.sites)
    asked = (
        view.counted(n, "Cluster") + " of the ClusterClass kamaji-broker"
        if options.topology
        else view.counted(n, "Cluster + RKCP pair")
    )
    screen.say(f"started: NATS {t.nats_url}, hub {t.hub_health_url}; creating {asked} from deploy/templates/")
    conn: bus.Connection | None = None
    try:
        conn = await _observe(t)
        await _create(t, options)
        return await _watch(t, options, screen, stop, conn)
    finally:
        if conn is not None:
            await conn.close()
        simulating.cancel()  # before the processes stop: it would only report them gone
        with contextlib.suppress(asyncio.CancelledError):
            await simulating


async def _run(options: Options, out: TextIO) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    screen = progress.Screen(out)
    with screen.owning():
        return await _session(options, screen, stop)


KAMAJI_NOUN = {"simulator": "Kamaji simulator", "real": "real Kamaji operator"}


def _starting(options: Options, t: launcher.System) -> str:
    sites = t.sites
    kind = "emulated" if options.kubernetes == "emulator" else "real"
    return (
        f"kamaji-broker sandbox: starting nats-server, {len(sites) + 1} {kind} clusters (mgmt, "
        f"{', '.join(sites)}), {view.counted(len(sites), KAMAJI_NOUN[options.kamaji])}, "
        + ("Cluster API's own controllers (clusterctl init), " if options.capi == "real" else "")
        + f"the hub and {view.counted(len(sites), 'agent')} "
        f"in {options.directory}/ (logs in {t.logs_dir}/)"
    )


async def _session(options: Options, screen: progress.Screen, stop: asyncio.Event) -> int:
    sites = workload.site_names(options.sites)
    # Heartbeats every 2 s instead of production's 10 s: the hub counts a site as connected only
    # after a beat, and RKCP's Ready condition (a summary including SiteConnected) should settle
    # within a breath of status.ready on a laptop rather than ten seconds later.
    made = launcher.Options(
        sites=sites,
        kamaji_delay=options.kamaji_delay,
        heartbeat_interval=HEARTBEAT,
        kubernetes=options.kubernetes,
        kamaji=options.kamaji,
        capi=options.capi,
    )
    t = launcher.System(options.directory, made)
    screen.say(_starting(options, t))
    try:
        starting = asyncio.create_task(t.start())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()  # System.start stops whatever it had started when cancelled.
            with contextlib.suppress(asyncio.CancelledError, processes.LaunchError):
                await starting
            screen.say("interrupted while starting; everything stopped")
            return 130 if options.exit_when_ready else 0
        stopping.cancel()
        starting.result()
        code = await _work(t, options, screen, stop)
    except (processes.LaunchError, natsd.NatsServerNotFound) as exc:
        print(f"kamaji-broker sandbox: error: {exc}", file=sys.stderr)
        code = 1
    except bus_errors.BusError as exc:
        print(f"kamaji-broker sandbox: error: the bus, read as the observer: {exc}", file=sys.stderr)
        code = 1
    except kerrors.KubeError as exc:
        print(
            f"kamaji-broker sandbox: error: the management cluster refused a request: {exc}", file=sys.stderr
        )
        code = 1
    finally:
        screen.freeze()  # the last view stays as it was; what follows goes under it
        screen.say("stopping every process...")
        await t.stop()
    screen.say("stopped.")
    return code


def main(options: Options, *, out: TextIO | None = None) -> int:
    """Run the sandbox command; returns the exit code."""
    return asyncio.run(_run(options, out or sys.stdout))
