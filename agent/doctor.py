"""``kamaji-broker doctor agent``: the agent's configuration checked as the agent would use it.

The steps, in order: the hub's public keys; the site's API server, the RBAC of ``agent.rbac``
and Kamaji's CRD; the NATS credential (the identity Secret's JWT in operator mode, read, never
renewed nor bootstrapped: doctor changes nothing; before the agent's first start, the
--nats-bootstrap-creds it would bootstrap with, connected with but never asked with); NATS
reachable and TLS; the permissions the site needs, those that change nothing probed, the others
named; the site's durable consumer; then whether the agent runs: the age of its latest heartbeat
on the bus, and its /readyz answering in time (at ``--health-url``, else at its ``--listen``
port on the loopback). Shared checks are in ``common.doctor``.
"""

from __future__ import annotations

from pathlib import Path

from agent import rbac
from agent.credential import state
from agent.settings import AgentSettings
from common import bus
from common.bus import identity as natsidentity
from common.doctor import credchecks, kubechecks, livechecks, natschecks, process, results, streamchecks
from common.doctor.results import Result
from common.doctor.running import Step
from common.files import keys
from common.kube import resources, reviews
from protocol import errors, natsjwt, permissions, streams, subjects

KEYS = "hub keys"
TCP_CRD = "tenantcontrolplanes.kamaji.clastix.io"
CHART_ROLE = "deploy/charts/kamaji-broker-agent/templates/rbac.yaml"


class AgentDoctor(process.Doctor):
    rbac_fix = (
        f"grant them in the agent chart's Role ({CHART_ROLE}, rules from agent/rbac.py): "
        "`helm upgrade` the release, or `kubectl auth can-i <verb> <resource> -n <namespace> "
        "--as system:serviceaccount:<ns>:<sa>` to see what is bound"
    )
    crd_fix = f"install Kamaji on this cluster (its chart installs the {TCP_CRD} CRD)"

    def __init__(self, settings: AgentSettings, *, health_url: str | None = None) -> None:
        super().__init__(settings)
        self.agent = settings
        self.health_url = health_url
        """Where the running agent serves /healthz and /readyz; None: its --listen port here."""
        self.held: natsidentity.Held | None = None
        self.bootstrap: Path | None = None
        """--nats-bootstrap-creds when the agent has no usable identity: connected with it."""

    def steps(self) -> list[Step]:
        k, c = kubechecks, credchecks
        return [
            Step(KEYS, self.keys_loaded),
            Step(k.KUBE, self.kubernetes),
            Step(k.RBAC, self.rbac, needs=(k.KUBE,)),
            Step(k.CRDS, self.crds, needs=(k.KUBE,)),
            Step(c.CREDENTIAL, self.credential, needs=(k.KUBE,) if self.agent.operator_mode else ()),
            Step(natschecks.NATS, self.nats),
            Step(natschecks.TLS, self.tls),
            Step(natschecks.PERMISSIONS, self.probes, needs=(natschecks.NATS,), skip=self.not_own),
            Step(natschecks.UNPROBED, self.unprobed, needs=(natschecks.NATS,), skip=self.not_own),
            Step(streamchecks.CONSUMER, self.consumer, needs=(natschecks.PERMISSIONS,), skip=self.not_own),
            # Needs the consumer: the hub makes the site's stream with it, and a site the hub has
            # not set up has no heartbeat to judge.
            Step(livechecks.HEARTBEAT, self.heartbeat, needs=(streamchecks.CONSUMER,), skip=self.not_own),
            Step(livechecks.READYZ, self.readyz, skip=self.not_own),
        ]

    def options(self) -> bus.Options | None:
        s = self.agent
        if s.operator_mode and self.held is None and self.bootstrap is None:
            return None
        bootstrapping = self.held is None and self.bootstrap is not None
        creds = self.bootstrap if bootstrapping else s.nats_creds
        inbox = permissions.bootstrap_inbox_prefix(s.site) if bootstrapping else bus.site_inbox_prefix(s.site)
        return bus.Options(
            servers=s.servers, seed_file=s.nats_seed, creds_file=creds, identity=self.held,
            ca_file=s.nats_ca_file, inbox_prefix=inbox,
            name=f"kamaji-broker-doctor-{s.site}", reconnect_wait=0.5,
        )  # fmt: skip

    def identity(self) -> str:
        s = self.agent
        if self.bootstrap is not None:
            return f"--nats-bootstrap-creds {self.bootstrap}"
        if s.nats_identity_secret is not None:
            return f"the JWT in Secret {s.nats_identity_secret}"
        return f"--nats-creds {s.nats_creds}" if s.nats_creds is not None else f"--nats-seed {s.nats_seed}"

    def accesses(self) -> tuple[reviews.Access, ...]:
        s = self.agent
        asked = kubechecks.accesses(rbac.RULES, s.target_namespaces)
        if s.operator_mode:
            namespace, name = s.identity_secret
            asked += kubechecks.accesses(rbac.IDENTITY_RULES, [namespace], name=name)
        return asked

    def crd_names(self) -> tuple[str, ...]:
        return (TCP_CRD,)

    async def keys_loaded(self) -> list[Result]:
        path = self.agent.hub_public_keys
        fix = f"copy the hub's hub-public-keys.json (`kamaji-broker keys generate`) to {path}"
        try:
            hub = keys.load_public_keys(path)
            sealing = hub.newest_sealing().key_id
        except (ValueError, errors.ProtocolError) as exc:
            return [results.failed(KEYS, f"--hub-public-keys: {exc}", fix)]
        trusted = hub.trusted_key_ids()
        if not trusted:
            return [results.failed(KEYS, f"{path}: no signing key that is not retired", fix)]
        return [results.passed(KEYS, f"{path}: trusts signing keys {', '.join(trusted)}; seals to {sealing}")]

    async def credential(self) -> list[Result]:
        s = self.agent
        expected = permissions.for_site(s.site, prefix=s.prefix)
        role = f"site {s.site}"
        if s.nats_seed is not None:
            return [credchecks.static_user("--nats-seed", str(s.nats_seed))]
        if s.nats_creds is not None:
            fix = f"mint a new .creds for {role} (`kamaji-broker site add {s.site}`), give it as --nats-creds"
            where = f"--nats-creds {s.nats_creds}"
            token = credchecks.token_of_creds(s.nats_creds)
        else:
            namespace, name = s.identity_secret
            where, fix = f"Secret {namespace}/{name}", self._renewal_fix()
            token, unusable = await self._stored()
            if self.held is None and s.nats_bootstrap_creds is not None:
                return self._will_bootstrap(s.nats_bootstrap_creds, f"{where} {unusable}")
            if not token:
                return [results.failed(credchecks.CREDENTIAL, f"{where} {unusable}", fix)]
        try:
            claims = natsjwt.decode(token, now=0)
        except errors.JWTError as exc:
            return [results.failed(credchecks.CREDENTIAL, f"{where}: {exc}", fix)]
        return [
            credchecks.lifetime(claims, now=self.clock(), where=where, fix=fix),
            credchecks.grants(
                claims, expected, role=role, fix=fix, doctor_only=(f"publish {self._beat_read}",)
            ),
        ]

    @property
    def _beat_read(self) -> str:
        """The grant only doctor uses: reading back the site's own latest heartbeat."""
        return permissions.heartbeat_read(self.agent.site, prefix=self.agent.prefix)

    def _renewal_fix(self) -> str:
        return (
            f"the agent renews its JWT from the hub before it expires; if it lapsed, give "
            f"--nats-bootstrap-creds a fresh bootstrap credential (the hub's Secret "
            f"{self.agent.site}-nats-bootstrap) and restart the agent"
        )

    async def _stored(self) -> tuple[str, str]:
        """The identity Secret's JWT ("" if unusable) and why it is not usable; keeps the
        identity for the NATS check when usable. An expired JWT is returned (to be said so)."""
        assert self.kube is not None
        namespace, name = self.agent.identity_secret
        found = await self.kube.get_or_none(resources.SECRET, name, namespace=namespace)
        stored = state.read(found)
        life, why = state.usable(stored, now=self.clock())
        expired = life is None and "expired" in why
        if found is None:
            why = "does not exist: no identity yet"
        elif stored.seed is None or not stored.jwt:
            why = f"holds no identity yet ({why})"
        else:
            why = f"holds no usable JWT ({why})"
        if stored.seed is not None and stored.jwt and (life is not None or expired):
            if life is not None:
                self.held = natsidentity.Held(stored.seed, stored.jwt)
            return stored.jwt, why
        return "", why

    def _will_bootstrap(self, path: Path, unusable: str) -> list[Result]:
        """No usable identity, but --nats-bootstrap-creds: what the agent would bootstrap with
        (read, never used: only a request on the bootstrap subject uses it up)."""
        s = self.agent
        fix = (
            f"give --nats-bootstrap-creds a fresh bootstrap credential for site {s.site}: the hub's Secret "
            f"{s.site}-nats-bootstrap (`kamaji-broker site add {s.site}` makes it)"
        )
        where = f"--nats-bootstrap-creds {path}"
        try:
            claims = natsjwt.decode(natsjwt.jwt_of_creds(path.read_text()), now=0)
        except OSError as exc:
            return [results.failed(credchecks.CREDENTIAL, f"{where}: {exc.strerror}", fix)]
        except (errors.JWTError, UnicodeDecodeError) as exc:
            return [results.failed(credchecks.CREDENTIAL, f"{where}: {exc}", fix)]
        self.bootstrap = path
        expected = permissions.for_bootstrap(s.site, prefix=s.prefix)
        return [
            credchecks.bootstrap(
                claims, now=self.clock(), where=f"{unusable}: will bootstrap with {path}", fix=fix
            ),
            credchecks.grants(claims, expected, role=f"site {s.site}'s bootstrap", fix=fix),
        ]

    def not_own(self) -> str:
        """Why the probes, the consumer and the running agent's checks are skipped: connected
        with the bootstrap credential, which grants neither, before the agent's first start
        ("" when the agent has its own credential)."""
        if self.bootstrap is None:
            return ""
        return "the agent has no credential of its own yet: it bootstraps at its first start"

    async def probes(self) -> list[Result]:
        """The grants that can be used without changing anything: its consumer's info, a Direct
        Get of one of its own intent subjects (no intent there: the server answers 404, still a
        pass) and a subscription to its inbox."""
        assert self.conn is not None
        s = self.agent
        consumer = streams.agent_consumer(s.site, prefix=s.prefix)
        intent = subjects.intent(s.site, "doctor", "doctor", prefix=s.prefix)
        return [
            await natschecks.probe_request(
                self.conn, f"$JS.API.CONSUMER.INFO.{consumer.stream}.{consumer.durable_name}"
            ),
            await natschecks.probe_request(self.conn, f"$JS.API.DIRECT.GET.{consumer.stream}.{intent}"),
            await natschecks.probe_subscribe(self.conn, f"{bus.site_inbox_prefix(s.site)}.doctor"),
        ]

    async def unprobed(self) -> list[Result]:
        s = self.agent
        consumer = streams.agent_consumer(s.site, prefix=s.prefix)
        # Reads, which change nothing: probed above, or used by the heartbeat check.
        probed = (
            f"$JS.API.CONSUMER.INFO.{consumer.stream}.",
            f"$JS.API.DIRECT.GET.{consumer.stream}.",
            self._beat_read,
        )
        granted = permissions.for_site(s.site, prefix=s.prefix).publish
        return [natschecks.unprobed([f"publish {g}" for g in granted if not g.startswith(probed)])]

    async def consumer(self) -> list[Result]:
        assert self.conn is not None
        s = self.agent
        expected = streams.agent_consumer(s.site, prefix=s.prefix)
        found = await streamchecks.consumer_state(self.conn, expected)
        return [streamchecks.consumer(expected, found, site=s.site)]

    async def heartbeat(self) -> list[Result]:
        assert self.conn is not None
        s = self.agent
        beat = await livechecks.last_heartbeat(self.conn, s.site, prefix=s.prefix)
        regrant = self._regrant_fix()
        return [
            livechecks.heartbeat(
                beat, now=self.clock(), interval=s.heartbeat_interval, site=s.site, regrant=regrant
            )
        ]

    def _regrant_fix(self) -> str:
        """How this identity gets the grant to read its heartbeat (``_beat_read``)."""
        s = self.agent
        if s.operator_mode:
            return "the hub grants it in every JWT it mints now: it comes with the agent's next renewal"
        if s.nats_creds is not None:
            return f"mint a new .creds for site {s.site} (`kamaji-broker site add {s.site}`), as --nats-creds"
        return (
            f"re-run `kamaji-broker site add {s.site}` (it rewrites the site's permissions in the "
            "server's auth.conf) and reload nats-server"
        )

    async def readyz(self) -> list[Result]:
        base = (self.health_url or livechecks.health_url(self.agent.listen)).rstrip("/")
        url, timeout = f"{base}/readyz", livechecks.READYZ_TIMEOUT
        answer = await livechecks.get_readyz(url, timeout=timeout)
        return [livechecks.readyz(answer, url=url, timeout=timeout)]
