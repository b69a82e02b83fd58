"""What every process's doctor shares: its Kubernetes client and NATS connection, made from the
process's own settings, and the checks run on them the same way for hub and agent.

``Doctor`` holds what earlier checks made (the client, the connection, what connecting saw) for
the later ones; a subclass (``hub.doctor``, ``agent.doctor``) says what its role needs: its
identity, its RBAC rules, its CRDs, its probes, and lists its steps. ``close`` releases both
connections.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from common import bus
from common import kube as ckube
from common.doctor import kubechecks, natschecks, results
from common.doctor.results import Result
from common.kube import reviews
from common.settings import ProcessSettings

CONNECT_DEADLINE = 5.0
"""Seconds to keep trying to connect to NATS before the check fails (with every reason seen)."""


class Doctor:
    """The checks shared by hub and agent, on the connections the earlier checks made."""

    rbac_fix = ""
    crd_fix = ""

    def __init__(self, settings: ProcessSettings, *, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.clock = clock
        self.kube: ckube.Kube | None = None
        self.conn: bus.Connection | None = None
        self.seen: natschecks.Seen | None = None

    # What a role says ------------------------------------------------------------------------

    def options(self) -> bus.Options | None:
        """How the process connects to NATS; None when it has no usable identity (said by an
        earlier check)."""
        raise NotImplementedError

    def identity(self) -> str:
        """The process's NATS identity in words (a file, a Secret: never its content)."""
        raise NotImplementedError

    def accesses(self) -> tuple[reviews.Access, ...]:
        raise NotImplementedError

    def crd_names(self) -> tuple[str, ...]:
        raise NotImplementedError

    # Shared checks ---------------------------------------------------------------------------

    def _kube_where(self) -> str:
        s = self.settings
        return f"--kubeconfig {s.kubeconfig}" if s.kubeconfig is not None else "in-cluster"

    async def kubernetes(self) -> list[Result]:
        s, where = self.settings, self._kube_where()
        try:
            self.kube = await ckube.connect(in_cluster=s.in_cluster, kubeconfig=s.kubeconfig)
        except Exception as exc:  # a kubeconfig that does not load: said, not raised
            return [results.failed(kubechecks.KUBE, f"{where}: {exc}", f"fix {where}")]
        return [await kubechecks.reachable(self.kube, where=where)]

    async def rbac(self) -> list[Result]:
        assert self.kube is not None
        asked = self.accesses()
        denied = await kubechecks.denied(self.kube, asked)
        return [kubechecks.rbac(len(asked), denied, fix=self.rbac_fix_for(denied))]

    def rbac_fix_for(self, denied: Sequence[reviews.Access]) -> str:
        """How to grant what was ``denied`` (the role's objects that hold those rules)."""
        return self.rbac_fix

    async def crds(self) -> list[Result]:
        assert self.kube is not None
        names = self.crd_names()
        return [kubechecks.crds(names, await kubechecks.missing_crds(self.kube, names), fix=self.crd_fix)]

    async def nats(self) -> list[Result]:
        options = self.options()
        if options is None:
            return [results.skipped(natschecks.NATS, "no usable NATS credential (see above)")]
        self.conn, self.seen = await natschecks.connect(options, deadline=CONNECT_DEADLINE)
        return [
            natschecks.reachable(
                self.seen, servers=options.servers, identity=self.identity(), ca_file=options.ca_file
            )
        ]

    async def tls(self) -> list[Result]:
        s = self.settings
        if self.seen is None:
            return [results.skipped(natschecks.TLS, "NATS was not tried")]
        uses_tls = bus.Options(servers=s.servers, ca_file=s.nats_ca_file).uses_tls
        return [natschecks.tls(self.seen, servers=s.servers, ca_file=s.nats_ca_file, uses_tls=uses_tls)]

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()
        if self.kube is not None:
            await self.kube.close()
