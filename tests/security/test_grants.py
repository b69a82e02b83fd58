"""A site's grants reach its own consumer and nothing else.

Generated: for every grant of every site (names that are prefixes of each other, a dotted
subject prefix), ``permissions.intersects`` proves that no subject the grant allows can reach
another consumer's ack subscription or JetStream API, another site's subjects or inbox, or any
stream administration; and that every grant has an exact token count. The consumers and
streams come from ``protocol.streams``, so the proof follows the topology.

Live: a ``+NXT`` pull request published by site-a on a subject that another consumer's ack
subscription (``$JS.ACK.<stream>.<consumer>.>``) matches, with a reply to site-a's own inbox,
was a pull from that consumer: site-a read (and, until ack-wait, starved) site-b's intents and
the hub's statuses and sealed secrets. The server must refuse the publish, naming the subject,
and the victim consumer must not move.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol import permissions, streams, subjects
from sandbox import natsd
from tests.security import nats_support as ns

K = subjects.Kind
SITES = ("site", "site-a", "site-b", "site-a-b", "a")
"""``site`` is a prefix of ``site-a``, which is a prefix of ``site-a-b``; ``a`` is a suffix."""
PREFIXES = ("kb", "acme.kb")

CONSUMER_API = ("MSG.NEXT", "INFO", "DELETE", "CREATE", "DURABLE.CREATE", "PAUSE", "LEADER.STEPDOWN", "UNPIN")
"""Every per-consumer JetStream API subject (``$JS.API.CONSUMER.<op>.<stream>.<consumer>``)."""

NO_SITE_MAY = (
    "$JS.API.STREAM.>",  # info, create, update, delete, purge, msg get/delete, snapshot, names, list
    "$JS.API.CONSUMER.CREATE.>",
    "$JS.API.CONSUMER.DURABLE.>",
    "$JS.API.CONSUMER.DELETE.>",
    "$JS.API.CONSUMER.LIST.>",
    "$JS.API.CONSUMER.NAMES.>",
    "$JS.API.CONSUMER.PAUSE.>",
    "$JS.API.CONSUMER.LEADER.>",
    "$JS.API.CONSUMER.UNPIN.>",
    "$JS.API.INFO",
    "$JS.API.ACCOUNT.>",
    "$JS.API.META.>",
    "$JS.API.SERVER.>",
    "$JS.FC.>",
    "$JS.EVENT.>",
    "$SYS.>",
    "$KV.>",
    "$O.>",
    "_INBOX.>",
)


def consumers(prefix: str) -> list[streams.ConsumerDef]:
    return [
        *(streams.agent_consumer(s, prefix=prefix) for s in SITES),
        *(streams.hub_consumer(s, prefix=prefix) for s in SITES),
    ]


def forbidden_publish(site: str, prefix: str) -> list[str]:
    """What a site must never be able to publish on, whatever the grant."""
    own = streams.agent_consumer(site, prefix=prefix)
    others = [c for c in consumers(prefix) if (c.stream, c.durable_name) != (own.stream, own.durable_name)]
    out = list(NO_SITE_MAY)
    for c in others:
        out.append(f"$JS.ACK.{c.stream}.{c.durable_name}.>")
        out += [f"$JS.API.CONSUMER.{op}.{c.stream}.{c.durable_name}" for op in CONSUMER_API]
        out.append(f"$JS.API.CONSUMER.CREATE.{c.stream}.{c.durable_name}.>")
    intents = streams.stream_name(K.INTENT, prefix=prefix)
    for s in (streams.intents_stream(prefix=prefix), *(streams.site_stream(x, prefix=prefix) for x in SITES)):
        out.append(f"$JS.API.DIRECT.GET.{s.name}")  # the stream-wide form: any message by body
        if s.name != intents and s.name != streams.site_stream_name(site, prefix=prefix):
            out.append(f"$JS.API.DIRECT.GET.{s.name}.>")
    # Its own stream: its heartbeat may be read back (doctor), its statuses and sealed secrets not.
    own_stream = f"$JS.API.DIRECT.GET.{streams.site_stream_name(site, prefix=prefix)}"
    out += [f"{own_stream}.{prefix}.{kind.value}.>" for kind in (K.STATUS, K.SECRET, K.INTENT)]
    out.append(f"{own_stream}.{subjects.heartbeat(site, prefix=prefix)}.>")
    out.append(f"{prefix}.{K.INTENT.value}.>")  # intents are the hub's, for every site
    for other in (s for s in SITES if s != site):
        for kind in (K.STATUS, K.SECRET):
            out.append(f"{prefix}.{kind.value}.{other}.>")
        out += [f"{prefix}.{K.SITE.value}.{other}", f"{prefix}.{K.SITE.value}.{other}.>"]
        out.append(f"$JS.API.DIRECT.GET.{intents}.{prefix}.{K.INTENT.value}.{other}.>")
        out.append(f"_INBOX_{other}.>")
    return out


FORBIDDEN_SUBSCRIBE = ("_INBOX.>", "$JS.>", "$SYS.>", ">")


def site_grants() -> list[tuple[str, str, str]]:
    return [
        (prefix, site, grant)
        for prefix in PREFIXES
        for site in SITES
        for grant in permissions.for_site(site, prefix=prefix).publish
    ]


@pytest.mark.parametrize(("prefix", "site", "grant"), site_grants())
def test_no_site_publish_grant_reaches_what_is_not_its_own(prefix: str, site: str, grant: str) -> None:
    assert ">" not in grant.split("."), f"{grant} is open-ended"
    reached = [f for f in forbidden_publish(site, prefix) if permissions.intersects(grant, f)]
    assert reached == [], f"{site}'s grant {grant} reaches {reached}"


@pytest.mark.parametrize(("prefix", "site"), [(p, s) for p in PREFIXES for s in SITES])
def test_a_sites_only_read_of_its_own_stream_is_its_heartbeat(prefix: str, site: str) -> None:
    """Of its own stream, a site may Direct Get exactly one subject, its heartbeat: no wildcard
    that a status or sealed-secrets subject could match."""
    own = f"$JS.API.DIRECT.GET.{streams.site_stream_name(site, prefix=prefix)}."
    reads = [g for g in permissions.for_site(site, prefix=prefix).publish if g.startswith(own)]
    assert reads == [own + subjects.heartbeat(site, prefix=prefix)]
    assert reads == [permissions.heartbeat_read(site, prefix=prefix)] and "*" not in reads[0]


@pytest.mark.parametrize(("prefix", "site"), [(p, s) for p in PREFIXES for s in SITES])
def test_no_site_subscribe_grant_reaches_another_inbox_or_data(prefix: str, site: str) -> None:
    (grant,) = permissions.for_site(site, prefix=prefix).subscribe
    others = [f"_INBOX_{o}.>" for o in SITES if o != site]
    reached = [
        f
        for f in (*FORBIDDEN_SUBSCRIBE, *others, f"{prefix}.>")
        if f != ">" and permissions.intersects(grant, f)
    ]
    assert reached == [] and grant != ">"


@pytest.mark.parametrize("prefix", PREFIXES)
def test_the_hubs_grants_reach_no_sites_consumer_subjects_or_inbox(prefix: str) -> None:
    hub = permissions.for_hub(prefix=prefix)
    agents = [streams.agent_consumer(s, prefix=prefix) for s in SITES]
    site_only = [
        *(f"$JS.ACK.{c.stream}.{c.durable_name}.>" for c in agents),
        *(f"{prefix}.{k.value}.>" for k in (K.STATUS, K.SECRET, K.SITE)),
        f"{prefix}.{K.INTENT.value}.*.*.*.>",
    ]
    reached = [(g, f) for g in hub.publish for f in site_only if permissions.intersects(g, f)]
    assert reached == []
    assert not any(permissions.intersects(g, f"_INBOX_{s}.>") for g in hub.subscribe for s in SITES)


@pytest.mark.parametrize(("prefix", "site"), [(p, s) for p in PREFIXES for s in SITES])
def test_a_site_keeps_every_subject_its_agent_needs(prefix: str, site: str) -> None:
    own = streams.agent_consumer(site, prefix=prefix)
    needed = [
        subjects.status(site, "tenants", "cp1", prefix=prefix),
        subjects.secret(site, "tenants", "cp1", prefix=prefix),
        subjects.heartbeat(site, prefix=prefix),
        f"$JS.API.CONSUMER.MSG.NEXT.{own.stream}.{own.durable_name}",
        f"$JS.API.CONSUMER.INFO.{own.stream}.{own.durable_name}",
        f"$JS.API.CONSUMER.RESET.{own.stream}.{own.durable_name}",
        f"$JS.API.DIRECT.GET.{own.stream}.{subjects.intent(site, 'tenants', 'cp1', prefix=prefix)}",
        # read by doctor agent, with the agent's credential: is the agent beating?
        f"$JS.API.DIRECT.GET.{streams.site_stream_name(site, prefix=prefix)}."
        + subjects.heartbeat(site, prefix=prefix),
        # as nats-server 2.15 sends it
        f"$JS.ACK.{own.stream}.{own.durable_name}.1.12.7.1796108060508329806.0",
    ]
    grants = permissions.for_site(site, prefix=prefix)
    assert [n for n in needed if not any(permissions.intersects(g, n) for g in grants.publish)] == []
    assert permissions.intersects(grants.subscribe[0], f"_INBOX_{site}.Zx81.3")


OWN = streams.agent_consumer("site-a")
VICTIMS = {
    f"{c.durable_name}@{c.stream}": c
    for c in (
        streams.hub_consumer("site-b"),
        streams.hub_consumer("site-a"),
        streams.agent_consumer("site-b"),
    )
}


@pytest.mark.parametrize("victim", sorted(VICTIMS))
async def test_a_site_cannot_pull_from_another_consumer_through_an_ack_subject(
    attacked: tuple[natsd.NatsServer, Path], hub: ns.Raw, site_a: ns.Raw, victim: str
) -> None:
    server, _ = attacked
    target = VICTIMS[victim]
    js = hub.nc.jetstream()
    before = await js.consumer_info(target.stream, target.durable_name)
    assert before.num_pending  # there is something to steal
    # The crafted subject: another consumer's ack prefix, then site-a's own, so that the old
    # grant `$JS.ACK.*.*.<intents>.agent-site-a.>` allowed it.
    crafted = f"$JS.ACK.{target.stream}.{target.durable_name}.{OWN.stream}.{OWN.durable_name}.1.1.1"
    inbox = site_a.inbox()
    await site_a.listen(inbox)

    await site_a.publish(crafted, ns.body(batch=5, expires=2_000_000_000).join((b"+NXT ", b"")), reply=inbox)

    await site_a.denied("publish", crafted)
    after = await js.consumer_info(target.stream, target.durable_name)
    assert (after.num_pending, after.num_ack_pending, after.num_waiting, after.delivered) == (
        before.num_pending,
        before.num_ack_pending,
        before.num_waiting,
        before.delivered,
    )
    assert site_a.received == []
    await ns.alive(server, hub, site_a)


def observer_forbidden(prefix: str) -> list[str]:
    """What ``kamaji-broker status``'s read-only user must never reach: any data subject, any
    message content but heartbeats, any consumer or stream operation but consumer info."""
    out = [g for g in NO_SITE_MAY if g != "_INBOX.>"]
    out.append(f"{prefix}.>")
    for c in consumers(prefix):
        out.append(f"$JS.ACK.{c.stream}.{c.durable_name}.>")
        out += [f"$JS.API.CONSUMER.{op}.{c.stream}.{c.durable_name}" for op in CONSUMER_API if op != "INFO"]
        out.append(f"$JS.API.CONSUMER.RESET.{c.stream}.{c.durable_name}")
    for s in (streams.intents_stream(prefix=prefix), *(streams.site_stream(x, prefix=prefix) for x in SITES)):
        out.append(f"$JS.API.DIRECT.GET.{s.name}")
        out += [f"$JS.API.DIRECT.GET.{s.name}.{prefix}.{k.value}.>" for k in (K.INTENT, K.STATUS, K.SECRET)]
    return out


@pytest.mark.parametrize(
    ("prefix", "grant"), [(p, g) for p in PREFIXES for g in permissions.for_observer(prefix=p).publish]
)
def test_no_observer_grant_reaches_a_message_or_an_operation(prefix: str, grant: str) -> None:
    assert ">" not in grant.split("."), f"{grant} is open-ended"
    reached = [f for f in observer_forbidden(prefix) if permissions.intersects(grant, f)]
    assert reached == [], f"the observer's grant {grant} reaches {reached}"


@pytest.mark.parametrize("prefix", PREFIXES)
def test_the_observers_inbox_is_nobody_elses(prefix: str) -> None:
    (grant,) = permissions.for_observer(prefix=prefix).subscribe
    others = ["_INBOX.>", *(f"_INBOX_{s}.>" for s in SITES), f"{prefix}.>", "$JS.>", "$SYS.>"]
    assert [f for f in others if permissions.intersects(grant, f)] == []
    assert not any(permissions.intersects(g, grant) for g in permissions.for_hub(prefix=prefix).subscribe)


@pytest.mark.parametrize(("prefix", "site"), [(p, s) for p in PREFIXES for s in SITES])
def test_a_bootstrap_credential_reads_no_reply_of_the_agent_nor_anyone_elses(prefix: str, site: str) -> None:
    """A bootstrap credential, handed around and possibly copied, reads only its own kind's
    inbox: never the agent's (its intents, its renewed JWT), another site's, the hub's or the
    observer's, and nothing the hub answers a site on."""
    (grant,) = permissions.for_bootstrap(site, prefix=prefix).subscribe
    others = [
        *FORBIDDEN_SUBSCRIBE,
        *(f"_INBOX_{s}.>" for s in SITES),
        *(f"{permissions.bootstrap_inbox_prefix(s)}.>" for s in SITES if s != site),
        f"{permissions.OBSERVER_INBOX}.>",
        f"{prefix}.>",
    ]
    assert [f for f in others if f != ">" and permissions.intersects(grant, f)] == []
    assert permissions.intersects(grant, f"{permissions.bootstrap_inbox_prefix(site)}.Zx81.3")
    sites = [g for s in SITES for g in permissions.for_site(s, prefix=prefix).subscribe]
    assert not any(permissions.intersects(grant, g) for g in sites)
