"""Start and stop the whole kamaji-broker system on this machine, as separate OS processes.

options        Options: the sites, delays, timeouts, NATS nodes and hub replicas of a system
layout         the sandbox directory (its marker, prepare_directory) and every path in it
children       the system's children: spawn, stop in order, faults by name, the logs' error lines
netlinks       with site_links: each site and nats-server in a network namespace, links to shape
natsnodes      the nats-servers (one, or a JetStream cluster): ports, configuration, leaders
clusters       emulated API servers and their clients, Site objects, a Kamaji simulator per site
broker         the hub replicas (leader election) and an agent per site
controlplanes  Cluster + RemoteKamajiControlPlane pairs in mgmt, and progress
identities     the launcher's own NATS users (hub, a site's, the observer's): short-lived, on demand
system         System: those layers in one object, and the order of start() and stop()
workload       the example Cluster + RemoteKamajiControlPlane manifests and the sandbox's names
invariants     what a healed system holds (every RKCP Ready with its TCP and Secrets, no orphan...)
installs       on real clusters: the hub's manifests, the agent's chart, the ServiceAccounts they run as
overlays       the overlay of deploy/hub for a hub that watches some namespaces

Each process is a ``sandbox.processes.Child``. Used by ``kamaji-broker sandbox``
(``sandbox.run``), ``tests/e2e``, ``tests/faults`` and ``bench/``.
"""

from sandbox.launcher import invariants, workload
from sandbox.launcher.layout import prepare_directory
from sandbox.launcher.options import Options
from sandbox.launcher.system import System
from sandbox.processes import LaunchError

__all__ = ["LaunchError", "Options", "System", "invariants", "prepare_directory", "workload"]
