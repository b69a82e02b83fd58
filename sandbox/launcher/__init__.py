"""Start and stop the whole kamaji-broker topology on this machine, as separate OS processes.

processes   one child process: start, wait until it serves (/readyz or its log), stop by PID
workload    the example Cluster + RemoteKamajiControlPlane manifests and the sandbox's names
topology    Topology: credentials, nats-server, emulated clusters, Kamaji simulators, hub, agents;
            faults injected by name (kill, pause, resume, start_again) and the logs' error lines
invariants  what a healed topology holds (every RKCP Ready with its TCP and Secrets, no orphan...)

Used by ``kamaji-broker sandbox`` (``sandbox.run``), ``tests/e2e``, ``tests/faults`` and ``bench/``.
"""

from sandbox.launcher import invariants, processes, workload
from sandbox.launcher.processes import LaunchError
from sandbox.launcher.topology import Topology, prepare_directory

__all__ = ["LaunchError", "Topology", "invariants", "prepare_directory", "processes", "workload"]
