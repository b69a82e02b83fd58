"""Wiring of the hub: settings → keys, NATS, Kubernetes, health server → controller, ingest, sites.

With ``--leader-elect`` only the Lease holder runs the controller, the ingest and the site
poller; a standby keeps its connections warm and takes over within the lease duration. With
``--shard`` every replica runs them for its share of the sites (``hub.shards``), started again
whenever the share changes, and the one that holds ``shares.SINGLETONS`` runs the credential
service too. Stops cleanly on SIGTERM/SIGINT, releasing its Lease so the others take over at once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Mapping

import nacl.signing

from common import aiotasks, bus, service
from common import kube as ckube
from common.files import keys as keyfiles
from hub import leader, shards
from hub import metrics as hub_metrics
from hub.controllers.deps import Deps, Revoke, Settings
from hub.controllers.rkcp import controller as rkcp_controller
from hub.credentials import operator, revocation, rules
from hub.credentials import service as credentialservice
from hub.ingest import consumer, heartbeats, liveness, observations
from hub.ingest import record as intake
from hub.reconcile import shares
from hub.settings import HubSettings
from protocol import keys, sealing

log = logging.getLogger(__name__)

LEADER_CHECK = "leader"
Loop = tuple[str, Callable[[], Awaitable[None]]]


class Hub(service.Service):
    """A running hub; ``stop()`` ends every loop, releases the Lease, closes every connection."""

    exit_when_bus_lost = True

    def __init__(self, settings: HubSettings) -> None:
        super().__init__()
        self.settings = settings
        self.metrics = hub_metrics.Metrics()
        self.controller: rkcp_controller.Controller | None = None
        self.elector: leader.Elector | None = None
        self.membership: shards.Membership | None = None
        self.active = aiotasks.Group()
        self.operator: operator.OperatorMode | None = None
        self.system: bus.Connection | None = None
        """Operator mode: the system-account connection that pushes revocations."""
        self.revoker: revocation.Revoker | None = None
        """Operator mode: the one writer of the account JWT (over ``system``)."""

    async def start(self) -> None:
        s = self.settings
        await self.serve_health(s.listen, self.metrics.registry)
        # Group read is tolerated: Kubernetes mounts the key Secrets 0440 with the pod's fsGroup.
        signer = keyfiles.read_signing_key(s.signing_key, group_ok=True)
        keyring = keyfiles.keyring(s.sealing_keys)
        log.info(
            "hub signs with key id %s; opens boxes sealed to key ids %s",
            keys.key_id(bytes(signer.verify_key)),
            ", ".join(sorted(keyring.key_ids)),
        )
        log.info(
            "hub watches RemoteKamajiControlPlanes in %s%s",
            ", ".join(s.watch_namespaces) or "every namespace",
            f", labelled cluster.x-k8s.io/watch-filter={s.watch_filter}" if s.watch_filter else "",
        )
        kube = await self._connect()
        # A fresh controller on every activation: what a standby remembers from an earlier term
        # (caches, observations) is stale, since the leader of the meantime consumed the streams.
        loops = functools.partial(self._new_term, kube=kube, signer=signer, keyring=keyring)
        if s.shard:
            self._share(kube, loops)
        elif s.leader_elect:
            self._elect(kube, loops)
        else:
            self._activate(loops())
        assert self.health_server is not None
        log.info("hub started; health on port %d", self.health_server.port)

    async def _connect(self) -> ckube.Kube:
        """The management cluster's client and the NATS connection (watched for readiness); in
        operator mode with a user the hub mints itself, and its system-account connection."""
        s = self.settings
        kube = self.kube = await ckube.connect(in_cluster=s.in_cluster, kubeconfig=s.kubeconfig)
        if s.nats_operator_dir is None:
            await self.connect_bus(s, name="kamaji-broker-hub")
            return kube
        lifetime = dt.timedelta(seconds=s.site_credential_lifetime)
        self.operator = operator.load(s.nats_operator_dir, lifetime=lifetime)
        identity = operator.hub_identity(self.operator, prefix=s.prefix, lifetime=lifetime)
        conn = await self.connect_bus(s, name="kamaji-broker-hub", identity=identity)
        self.spawn("nats-identity", lambda: operator.refresh(conn, identity))
        self.system = await bus.connect(
            bus.Options(
                servers=s.servers, creds_file=self.operator.system_creds, ca_file=s.nats_ca_file,
                name="kamaji-broker-hub-system",
            )
        )  # fmt: skip
        self.also_watched.append(self.system)
        self.revoker = revocation.Revoker(self.system, self.operator.authority)
        log.info("operator mode: hub mints NATS users of account %s", self.operator.authority.account)
        return kube

    def _elect(self, kube: ckube.Kube, new_term: Callable[[], list[Loop]]) -> None:
        """Take part in the election: only the Lease holder runs a term's loops."""
        s = self.settings
        self.elector = leader.Elector(
            kube=kube,
            namespace=s.lease_namespace,
            name=s.lease_name,
            identity=self._identity(),
            lease_duration=s.lease_duration,
            renew_interval=max(0.2, s.lease_duration / 3),
        )
        self.readiness.set(LEADER_CHECK, True, "standby")
        elector = self.elector
        self.spawn("leader-election", elector.run)
        self.spawn("leadership", lambda: self._follow_leadership(elector, new_term))

    def _share(self, kube: ckube.Kube, new_term: Callable[..., list[Loop]]) -> None:
        """Take part in sharing the sites: a term for each share this replica is given."""
        s = self.settings

        async def reshare(share: shares.Share) -> None:
            await self._deactivate()  # what the old share led stops before anything else
            if share.view:
                self._activate(new_term(share=share))
                self.readiness.set(LEADER_CHECK, True, f"leading a share among {len(share.view)} replicas")
            else:
                self.readiness.set(LEADER_CHECK, True, "leading no site (waiting for its Lease)")

        self.membership = shards.Membership(
            kube=kube, namespace=s.lease_namespace, group=s.lease_name, identity=self._identity(),
            on_change=reshare, lease_duration=s.lease_duration, renew_interval=max(0.2, s.lease_duration / 3),
        )  # fmt: skip
        self.readiness.set(LEADER_CHECK, True, "leading no site (waiting for its Lease)")
        self.spawn("hub shards", self.membership.run)

    def _identity(self) -> str:
        return self.settings.identity or f"{socket.gethostname()}-{os.getpid()}"

    def _new_term(
        self,
        *,
        kube: ckube.Kube,
        signer: nacl.signing.SigningKey,
        keyring: sealing.Keyring,
        share: shares.Share | None = None,
    ) -> list[Loop]:
        """The loops of one term as leader (or of one share of the sites), with state of their own."""
        s = self.settings
        deps = self._deps(kube, signer, keyring, share)
        conn, site_state, reader = deps.conn, deps.sites, deps.intake
        controller = rkcp_controller.Controller(Settings.of(s), deps)
        # One way: the ingest tells the controller what changed; the controller knows it not.
        ingest = consumer.Ingest(consumer.Deps(
            reader, controller.known_sites, controller.maps, controller.on_observation, controller.ensured,
            heartbeat=heartbeats.heartbeats(site_state, self.metrics),
        ))  # fmt: skip
        self.controller = controller

        async def poll_sites() -> None:
            await heartbeats.run(
                site_state,
                conn,
                sites_provider=controller.known_sites,
                prefix=s.prefix,
                metrics=self.metrics,
                heartbeat_interval=s.heartbeat_interval,
                on_change=controller.on_site_change,
                first=controller.listed,
                polled=controller.polled,
            )

        return [
            ("rkcp controller", controller.run),
            ("ingest", ingest.run),
            ("sites", poll_sites),
            *(self._credential_service(kube, controller) if deps.singletons else []),
        ]

    def _deps(
        self,
        kube: ckube.Kube,
        signer: nacl.signing.SigningKey,
        keyring: sealing.Keyring,
        share: shares.Share | None,
    ) -> Deps:
        """A term's dependencies: fresh state (observations, liveness) on the shared connections."""
        s = self.settings
        assert self.conn is not None
        conn = self.conn
        seen = observations.Observations()
        reader = intake.Intake(
            intake.Deps(conn=conn, observations=seen, keyring=keyring, metrics=self.metrics), prefix=s.prefix
        )
        earlier = keyfiles.load_public_keys(s.hub_public_keys).verify_keys() if s.hub_public_keys else {}
        return Deps(
            kube=kube, conn=conn, signer=signer, observations=seen, intake=reader, sites=liveness.Sites(),
            metrics=self.metrics, earlier_keys=earlier, revoke=self._revoker(),
            mint_bootstrap=operator.bootstrap_minter(
                self.operator, prefix=s.prefix, lifetime=dt.timedelta(seconds=s.bootstrap_lifetime)
            ) if self.operator is not None else None,
            issuer=revocation.issuer(self.operator.authority) if self.operator is not None else None,
            singletons=share is None or share.holds(shares.SINGLETONS),
            **({"holds": share.holds} if share is not None else {}),
        )  # fmt: skip

    def _credential_service(self, kube: ckube.Kube, controller: rkcp_controller.Controller) -> list[Loop]:
        """Operator mode: the loop that answers the agents' bootstrap and renewal requests."""
        s, conn, revoker = self.settings, self.conn, self.revoker
        if revoker is None or conn is None:
            return []
        service = credentialservice.CredentialService(
            credentialservice.Deps(
                conn=conn, revoker=revoker, kube=kube, sites=self._site_record(controller),
                metrics=self.metrics,
            ),
            prefix=s.prefix, lifetime=dt.timedelta(seconds=s.site_credential_lifetime),
        )  # fmt: skip
        return [
            ("credential service", service.run),
            ("nats account", lambda: operator.keep_account(revoker)),
        ]

    def _revoker(self) -> Revoke | None:
        """Operator mode: revoke user keys by pushing the account JWT (``hub.credentials.revocation``)."""
        revoker = self.revoker
        if revoker is None:
            return None

        async def revoke(keys: Mapping[str, int]) -> None:
            await revoker.revoke(keys, now=dt.datetime.now(dt.UTC))
            self.metrics.credentials_revoked.inc(len(keys))

        return revoke

    @staticmethod
    def _site_record(
        controller: rkcp_controller.Controller,
    ) -> Callable[[str], Awaitable[rules.SiteRecord]]:
        async def record(site: str) -> rules.SiteRecord:
            await controller.informers.sites_synced.wait()
            return controller.site_sync.record(site)

        return record

    def _activate(self, loops: list[Loop]) -> None:
        for name, run in loops:
            self.active.supervise(name, run)

    async def _deactivate(self) -> None:
        await self.active.stop()
        self.metrics.clear_leader_gauges()

    async def _follow_leadership(self, elector: leader.Elector, new_term: Callable[[], list[Loop]]) -> None:
        while True:
            await elector.leading.wait()
            self.readiness.set(LEADER_CHECK, True, f"leading as {elector.identity}")
            self._activate(new_term())
            await elector.standby.wait()
            # Lost the Lease: stop acting at once, before another replica starts.
            await self._deactivate()
            self.readiness.set(LEADER_CHECK, True, "standby")

    async def stop(self) -> None:
        await self._deactivate()
        await super().stop()

    async def before_close(self) -> None:
        # Give the Lease up so a standby takes over at once rather than after its duration.
        if self.elector is not None:
            with contextlib.suppress(Exception):
                await self.elector.release()
        if self.membership is not None:
            with contextlib.suppress(Exception):
                await self.membership.release()
        if self.system is not None:
            await self.system.close()


async def run(settings: HubSettings) -> None:
    await service.run_until_signalled(Hub(settings))
