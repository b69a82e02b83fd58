"""Stream and consumer definitions as data: what ``common.bus.ensure_topology`` creates.

Two kinds of stream, each keeping one message per subject (a compacted log: the latest desired
state, status, sealed secrets or heartbeat per subject), on file storage, with a duplicate
window for ``Nats-Msg-Id`` de-duplication:

    KB_INTENTS          kb.intent.*.*.*                           written by the hub only
    KB_SITE_<site>      kb.status.<site>.>  kb.secret.<site>.>    written by the agent of <site>
                        kb.site.<site>

Why one inbound stream per site: a shared inbound stream has one set of limits for
every site, so one site can fill it and the store; a stream of its own gives each site a quota
the server enforces (``SiteLimits``: message size, message count, bytes, discard new) and a site
at its quota is refused on publish while every other site is untouched. The subjects are the
ones a site is granted already, so the site's permissions do not change. (NATS accounts with
JetStream limits would also do it, but need exports and imports between the hub's account and
every site's; a stream per site is the same quota with the configuration we already have.)

Only the hub creates streams and consumers; agents bind (``agent-<site>`` on KB_INTENTS) and the
hub reads each site's stream through its own durable consumer ``hub``.
"""

from __future__ import annotations

from typing import Final

import msgspec

from protocol import labels, subjects

DUPLICATE_WINDOW_SECONDS: Final = 120.0
"""Long enough to cover a publisher's retries of an ambiguous timeout after a reconnect."""

MAX_CONSUMERS: Final = 100_000
"""Set explicitly: left unset, a server with account limits caps consumers per stream (1000),
and KB_INTENTS holds one durable consumer per site."""

ACK_WAIT_SECONDS: Final = 30.0
"""How long the hub may work on a status or sealed secrets before they are redelivered."""

AGENT_ACK_WAIT_SECONDS: Final = 5.0
"""How long an intent fetched by an agent stays its own without an ack or an in-progress.

Short, because it is how long intents fetched by an agent that died (SIGKILL, OOM, node lost)
wait before its successor gets them: with 30 s a restarted agent sat idle for up to half a
minute. A live agent keeps every intent it holds (queued or being applied) with
in-progress acks every third of this (``agent.apply.keeper``), so a slow apply is not
redelivered; if one is anyway (a stalled event loop), applying is idempotent."""

MAX_ACK_PENDING: Final = 1_000

MAX_MSG_SIZE: Final = 64 * 1024
"""Bytes: the largest message any stream stores. The largest message of the protocol is a
sealed box of an admin kubeconfig and a CA (cert and key): about 12 KiB of JSON with RSA-2048
keys (Kamaji's default), about 20 KiB with RSA-4096; 64 KiB leaves three times that. Statuses,
heartbeats and intents are a few KiB at most."""

MAX_PAYLOAD: Final = 2 * MAX_MSG_SIZE
"""Bytes: nats-server's ``max_payload`` (any single message on the connection). Above
``MAX_MSG_SIZE`` so that the stream's own limit, with its clear error, is what a site meets
first; far below the server's 1 MiB default, which let a site push 0.5 MiB boxes."""

SITE_MAX_MSGS: Final = 4_096
"""Messages a site's stream holds: a status and a sealed box per control plane plus the
heartbeat, so about 2,000 control planes per site."""

SITE_MAX_BYTES: Final = 64 * 1024 * 1024
"""Bytes a site's stream holds: 2,000 control planes at ~13 KiB (status and sealed box) take
about 26 MiB; 64 MiB leaves room for bigger keys and is what one site can ever cost the store."""

HUB_CONSUMER: Final = "hub"
"""The durable name of the hub's consumer on every site's stream (one per stream)."""


class SiteLimits(msgspec.Struct, frozen=True, kw_only=True):
    """The quota of one site's stream, enforced by the server (a publish beyond it is refused)."""

    max_msg_size: int = MAX_MSG_SIZE
    max_msgs: int = SITE_MAX_MSGS
    max_bytes: int = SITE_MAX_BYTES

    def __post_init__(self) -> None:
        if self.max_msg_size < 1024:
            raise ValueError(f"max_msg_size must be at least 1024 bytes, got {self.max_msg_size}")
        if self.max_msgs < 2:
            raise ValueError(f"max_msgs must be at least 2 (a heartbeat and a status), got {self.max_msgs}")
        if self.max_bytes < self.max_msg_size:
            raise ValueError(
                f"max_bytes ({self.max_bytes}) must be at least max_msg_size ({self.max_msg_size})"
            )


class StreamDef(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    subjects: tuple[str, ...]
    replicas: int = 1
    max_msgs_per_subject: int = 1
    storage: str = "file"
    retention: str = "limits"
    duplicate_window: float = DUPLICATE_WINDOW_SECONDS
    max_consumers: int = MAX_CONSUMERS
    allow_direct: bool = True
    max_msg_size: int = MAX_MSG_SIZE
    max_msgs: int = -1
    """-1: no limit (KB_INTENTS, written by the hub alone, holds one message per control plane)."""
    max_bytes: int = -1
    discard: str = "old"
    """``new`` for a site's stream: at its quota a publish is refused rather than older messages
    (another control plane's status) being dropped. A message that replaces the one on its own
    subject still fits (the server lets it through), so existing control planes keep reporting."""
    site: str = ""
    """The site whose stream this is; empty for KB_INTENTS."""


class ConsumerDef(msgspec.Struct, frozen=True, kw_only=True):
    stream: str
    durable_name: str
    filter_subjects: tuple[str, ...]
    ack_policy: str = "explicit"
    deliver_policy: str = "all"
    ack_wait: float = ACK_WAIT_SECONDS
    max_deliver: int = -1
    """Never give up on a message: an intent must not be lost because a site was broken for a while."""
    max_ack_pending: int = MAX_ACK_PENDING

    @property
    def filter_subject(self) -> str:
        """The single filter subject, or "" when there are several."""
        return self.filter_subjects[0] if len(self.filter_subjects) == 1 else ""


def _base(prefix: str) -> str:
    return subjects.check_prefix(prefix).upper().replace(".", "_").replace("-", "_")


def intents_stream_name(*, prefix: str = subjects.DEFAULT_PREFIX) -> str:
    """``KB_INTENTS`` for prefix ``kb``; a dotted prefix ``acme.kb`` gives ``ACME_KB_INTENTS``."""
    return f"{_base(prefix)}_INTENTS"


def site_stream_name(site: str, *, prefix: str = subjects.DEFAULT_PREFIX) -> str:
    """``KB_SITE_site-a``: the inbound stream of one site (the label keeps its case and '-')."""
    return f"{_base(prefix)}_SITE_{labels.check(site, field='site')}"


def stream_name(kind: subjects.Kind, *, site: str = "", prefix: str = subjects.DEFAULT_PREFIX) -> str:
    """The stream holding subjects of ``kind``: KB_INTENTS, or ``site``'s own stream for the rest."""
    if kind is subjects.Kind.INTENT:
        return intents_stream_name(prefix=prefix)
    if not site:
        raise ValueError(f"{kind.value} subjects live in a site's stream: name the site")
    return site_stream_name(site, prefix=prefix)


def _check_replicas(replicas: int) -> None:
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")


def intents_stream(*, replicas: int = 1, prefix: str = subjects.DEFAULT_PREFIX) -> StreamDef:
    _check_replicas(replicas)
    return StreamDef(
        name=intents_stream_name(prefix=prefix),
        subjects=(subjects.globbed(subjects.Kind.INTENT, prefix=prefix),),
        replicas=replicas,
    )


def site_subjects(site: str, *, prefix: str = subjects.DEFAULT_PREFIX) -> tuple[str, ...]:
    """What a site publishes: its statuses, its sealed secrets, its heartbeat."""
    return (
        subjects.site_filter(subjects.Kind.STATUS, site, prefix=prefix),
        subjects.site_filter(subjects.Kind.SECRET, site, prefix=prefix),
        subjects.heartbeat(site, prefix=prefix),
    )


def site_stream(
    site: str,
    *,
    replicas: int = 1,
    prefix: str = subjects.DEFAULT_PREFIX,
    limits: SiteLimits = SiteLimits(),  # noqa: B008 - frozen, so one shared default is safe
) -> StreamDef:
    """The inbound stream of ``site``, with its quota."""
    _check_replicas(replicas)
    return StreamDef(
        name=site_stream_name(site, prefix=prefix),
        subjects=site_subjects(site, prefix=prefix),
        replicas=replicas,
        max_msg_size=limits.max_msg_size,
        max_msgs=limits.max_msgs,
        max_bytes=limits.max_bytes,
        discard="new",
        site=site,
    )


def agent_consumer_name(site: str) -> str:
    return f"agent-{site}"


def agent_consumer(site: str, *, prefix: str = subjects.DEFAULT_PREFIX) -> ConsumerDef:
    """The durable pull consumer an agent binds to: its site's intents only."""
    return ConsumerDef(
        stream=intents_stream_name(prefix=prefix),
        durable_name=agent_consumer_name(site),
        filter_subjects=(subjects.site_filter(subjects.Kind.INTENT, site, prefix=prefix),),
        ack_wait=AGENT_ACK_WAIT_SECONDS,
    )


def hub_consumer(site: str, *, prefix: str = subjects.DEFAULT_PREFIX) -> ConsumerDef:
    """The hub's durable consumer of one site's statuses, sealed secrets and heartbeats (each
    delivered as it lands: nothing is polled per site at rest).

    Without acknowledgements: the stream keeps every control plane's latest message, which the
    hub reads when it does not know it (``hub.ingest.record``), so nothing needs redelivering. A
    message delivered but never seen (lost in flight, taken by another process) is a gap in the
    consumer sequence, which makes the hub read that site's stream again (``hub.ingest.consumer``)."""
    return ConsumerDef(
        stream=site_stream_name(site, prefix=prefix),
        durable_name=HUB_CONSUMER,
        filter_subjects=(
            subjects.site_filter(subjects.Kind.STATUS, site, prefix=prefix),
            subjects.site_filter(subjects.Kind.SECRET, site, prefix=prefix),
            subjects.heartbeat(site, prefix=prefix),
        ),
        ack_policy="none",
    )


MISSED_HEARTBEATS: Final = 3
"""A site is connected while its heartbeat is at most this many intervals old (the hub's rule,
``status``'s and doctor's): one lost or late heartbeat must not flap ``SiteConnected``."""
