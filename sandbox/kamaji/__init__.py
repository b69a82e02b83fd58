"""The Kamaji simulator: a stand-in for Kamaji's TenantControlPlane controller.

Owns what a site cluster's Kamaji would do to TenantControlPlanes, faithfully enough for the
agent and the hub: the ``finalizer.kamaji.clastix.io`` finalizer, the
``status.kubernetesResources.version.status`` lifecycle (Provisioning → Ready, Upgrading,
Sleeping), the endpoint, and real ``<tcp>-ca`` / ``<tcp>-admin-kubeconfig`` Secrets. A controller
written against the public API with the project's one Kubernetes client, ``common.kube``: it runs
on the sandbox's emulator or on any real cluster, and never imports ``sandbox.kubeapi``.

Modules: ``observed`` (pure data: what it decides from), ``reconcile`` (pure decisions:
finalizer, Secrets, deletion), ``reconcile_status`` (the
pure phase lifecycle and the status written), ``pki`` (pure certificates and kubeconfigs),
``addresses`` (endpoint pool), ``simulator`` (the informer and the per-TCP workers), ``visiting``
(one worker's visit: observe, reconcile, execute, write status), ``crds`` (installing CRD files
on a cluster).

    sim = Simulator(api_client_or_kubeconfig_path, ready_delay=3, delete_delay=0)
    await sim.start()
    ...
    await sim.stop()
"""

from __future__ import annotations

from sandbox.kamaji.reconcile import FINALIZER
from sandbox.kamaji.reconcile_status import Phase
from sandbox.kamaji.simulator import Simulator

__all__ = ["FINALIZER", "Phase", "Simulator"]
