"""``kamaji-broker doctor hub``: the hub's configuration checked as the hub would use it.

The steps, in order: the signing and sealing keys and the public keys file; the management
cluster's API server, the RBAC of ``hub.rbac`` and the CRDs of deploy/crds; the NATS credential
(in operator mode ``--nats-operator-dir`` loads and the hub mints its own user, in memory, as at
start); NATS reachable and TLS; the permissions the hub needs, probed safely; the intents stream
and the site streams. Shared checks are in ``common.doctor``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from common import bus
from common import kube as ckube
from common.bus import identity as natsidentity
from common.doctor import credchecks, kubechecks, natschecks, process, results, streamchecks
from common.doctor.results import Result
from common.doctor.running import Step
from common.files import keys as keyfiles
from common.kube import resources, reviews
from hub import grants
from hub.credentials import operator
from hub.settings import HubSettings
from protocol import errors, keys, natsjwt, permissions, streams

KEYS = "hub keys"
CRDS = (
    "remotekamajicontrolplanes.controlplane.cluster.x-k8s.io",
    "remotekamajicontrolplanetemplates.controlplane.cluster.x-k8s.io",
    "sites.kamaji-broker.io",
)


class HubDoctor(process.Doctor):
    crd_fix = "install the CRDs: `kubectl apply -k deploy/crds`"

    def __init__(self, settings: HubSettings) -> None:
        super().__init__(settings)
        self.hub = settings
        self.minted: natsidentity.SelfMinted | None = None

    def steps(self) -> list[Step]:
        k, c, n = kubechecks, credchecks, natschecks
        return [
            Step(KEYS, self.keys_loaded),
            Step(k.KUBE, self.kubernetes),
            Step(k.RBAC, self.rbac, needs=(k.KUBE,)),
            Step(k.CRDS, self.crds, needs=(k.KUBE,)),
            Step(c.CREDENTIAL, self.credential),
            Step(n.NATS, self.nats),
            Step(n.TLS, self.tls),
            Step(n.PERMISSIONS, self.probes, needs=(n.NATS,)),
            Step(n.UNPROBED, self.unprobed, needs=(n.NATS,)),
            Step(streamchecks.STREAMS, self.streams, needs=(n.PERMISSIONS,)),
        ]

    def options(self) -> bus.Options | None:
        s = self.hub
        if s.nats_operator_dir is not None and self.minted is None:
            return None
        return bus.Options(
            servers=s.servers, seed_file=s.nats_seed, creds_file=s.nats_creds, identity=self.minted,
            ca_file=s.nats_ca_file, name="kamaji-broker-doctor-hub", reconnect_wait=0.5,
        )  # fmt: skip

    def identity(self) -> str:
        s = self.hub
        if s.nats_operator_dir is not None:
            return f"a hub user minted from --nats-operator-dir {s.nats_operator_dir}"
        return f"--nats-creds {s.nats_creds}" if s.nats_creds is not None else f"--nats-seed {s.nats_seed}"

    def grants(self) -> tuple[grants.Grant, ...]:
        s = self.hub
        bootstrap = (s.bootstrap_namespace or s.lease_namespace) if s.nats_operator_dir else ""
        lease = s.lease_namespace if s.leader_elect or s.shard else ""
        return grants.grants(s.watch_namespaces, lease_namespace=lease, bootstrap_namespace=bootstrap)

    def accesses(self) -> tuple[reviews.Access, ...]:
        asked = (kubechecks.accesses(g.rules, g.namespaces) for g in self.grants())
        return tuple(sorted({a for some in asked for a in some}))

    def rbac_fix_for(self, denied: Sequence[reviews.Access]) -> str:
        """What grants the refused ones: the ClusterRoles (bound cluster-wide or, for a hub that
        watches some namespaces, in each of them) or the Roles in the hub's own namespace."""
        refused = set(denied)
        fixes = [g.fix for g in self.grants() if refused & set(kubechecks.accesses(g.rules, g.namespaces))]
        return "; ".join(dict.fromkeys(fixes))

    def crd_names(self) -> tuple[str, ...]:
        return CRDS

    async def keys_loaded(self) -> list[Result]:
        s = self.hub
        fix = (
            "make them with `kamaji-broker keys generate --out DIR` and give --signing-key DIR/signing.key, "
        )
        fix += "--sealing-keys DIR/sealing, --hub-public-keys DIR/hub-public-keys.json"
        try:
            signer = keyfiles.read_signing_key(s.signing_key, group_ok=True)
            ring = keyfiles.keyring(s.sealing_keys)
            public = keyfiles.load_public_keys(s.hub_public_keys) if s.hub_public_keys else None
        except (ValueError, OSError, errors.ProtocolError) as exc:
            return [results.failed(KEYS, str(exc), fix)]
        signing = keys.key_id(bytes(signer.verify_key))
        detail = f"signs with {signing}; opens {', '.join(sorted(ring.key_ids))}"
        if public is None:
            return [results.passed(KEYS, f"{detail}; no --hub-public-keys (only the current key counts)")]
        return [self._published(public, signing, ring.key_ids, detail)]

    def _published(
        self, public: keys.HubPublicKeys, signing: str, opened: frozenset[str], detail: str
    ) -> Result:
        """The public keys file the agents trust must name the key the hub signs with and seal to
        a key it can open."""
        fix = (
            f"publish the current {self.hub.hub_public_keys} to every site "
            "(`kamaji-broker keys generate` keeps it)"
        )
        if signing not in public.trusted_key_ids():
            return results.failed(
                KEYS, f"{self.hub.hub_public_keys} does not trust signing key {signing}", fix
            )
        newest = public.newest_sealing().key_id
        if newest not in opened:
            return results.failed(
                KEYS, f"agents seal to {newest} ({self.hub.hub_public_keys}), which --sealing-keys lacks", fix
            )
        return results.passed(KEYS, f"{detail}; {self.hub.hub_public_keys} matches")

    async def credential(self) -> list[Result]:
        s = self.hub
        expected = permissions.for_hub(prefix=s.prefix)
        if s.nats_seed is not None:
            return [credchecks.static_user("--nats-seed", str(s.nats_seed))]
        if s.nats_creds is not None:
            fix = "mint a new hub .creds (`kamaji-broker nats-config`) and give it as --nats-creds"
            token, where = credchecks.token_of_creds(s.nats_creds), f"--nats-creds {s.nats_creds}"
        else:
            assert s.nats_operator_dir is not None
            fix = (
                f"--nats-operator-dir {s.nats_operator_dir}: "
                "`kamaji-broker nats-config --auth operator` writes it as DIR/hub"
            )
            try:
                mode = operator.load(s.nats_operator_dir)
            except ValueError as exc:
                return [results.failed(credchecks.CREDENTIAL, str(exc), fix)]
            lifetime = dt.timedelta(seconds=s.site_credential_lifetime)
            self.minted = operator.hub_identity(mode, prefix=s.prefix, lifetime=lifetime)
            token, where = self.minted.jwt(), f"minted from {s.nats_operator_dir}"
        try:
            claims = natsjwt.decode(token, now=0)
        except errors.JWTError as exc:
            return [results.failed(credchecks.CREDENTIAL, f"{where}: {exc}", fix)]
        return [
            credchecks.lifetime(claims, now=self.clock(), where=where, fix=fix),
            credchecks.grants(claims, expected, role="the hub", fix=fix),
        ]

    async def probes(self) -> list[Result]:
        assert self.conn is not None
        intents = streams.intents_stream_name(prefix=self.hub.prefix)
        return [
            await natschecks.probe_request(self.conn, "$JS.API.INFO"),
            await natschecks.probe_request(self.conn, f"$JS.API.STREAM.INFO.{intents}"),
            await natschecks.probe_subscribe(self.conn, "_INBOX.doctor"),
        ]

    async def unprobed(self) -> list[Result]:
        granted = permissions.for_hub(prefix=self.hub.prefix)
        publish = [f"publish {g}" + (" (beyond the two probed)" if g == "$JS.API.>" else "")
                   for g in granted.publish]  # fmt: skip
        subscribe = [f"subscribe {g}" for g in granted.subscribe if not g.startswith("_INBOX.")]
        replies = ["reply to requests"] if granted.reply_to_requests else []
        return [natschecks.unprobed(publish + subscribe + replies)]

    async def streams(self) -> list[Result]:
        assert self.conn is not None
        s = self.hub
        sites = set(s.static_sites)
        if self.kube is not None:
            try:
                listing = await self.kube.list(resources.SITE)
                sites |= {str(i["metadata"]["name"]) for i in listing.items}
            except ckube.errors.KubeError:
                pass  # said by the CRD and RBAC checks
        names = [streams.intents_stream_name(prefix=s.prefix)]
        names += [streams.site_stream_name(site, prefix=s.prefix) for site in sorted(sites)]
        return [streamchecks.streams_result(names, await streamchecks.missing_streams(self.conn, names))]
