"""Start and stop the whole kamaji-broker topology on this machine, as separate OS processes.

processes   one child process: start, wait until it serves (/readyz or its log), stop by PID
workload    the example Cluster + RemoteKamajiControlPlane manifests and the sandbox's names
topology    Topology: credentials, nats-server, emulated clusters, Kamaji simulators, hub, agents

Used by ``kamaji-broker sandbox`` (``sandbox.run``), ``tests/e2e`` and ``bench/provision.py``.
"""

from sandbox.launcher import processes, workload
from sandbox.launcher.processes import LaunchError
from sandbox.launcher.topology import Topology, prepare_directory

__all__ = ["LaunchError", "Topology", "prepare_directory", "processes", "workload"]
