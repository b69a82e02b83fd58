"""Stream and consumer definitions as data: what ``common.bus.ensure_topology`` creates.

Each stream keeps one message per subject (a compacted log: the latest desired state, status,
sealed secrets or heartbeat per subject), on file storage, with a duplicate window for
``Nats-Msg-Id`` de-duplication. Only the hub creates streams and consumers; agents bind.
"""

from __future__ import annotations

from typing import Final

import msgspec

from protocol import subjects

DUPLICATE_WINDOW_SECONDS: Final = 120.0
"""Long enough to cover a publisher's retries of an ambiguous timeout after a reconnect."""

MAX_CONSUMERS: Final = 100_000
"""Set explicitly: left unset, a server with account limits caps consumers per stream (1000),
and KB_INTENTS holds one durable consumer per site."""

ACK_WAIT_SECONDS: Final = 30.0
"""How long an agent may work on an intent before it is redelivered (it sends in-progress
acks for longer applies)."""

MAX_ACK_PENDING: Final = 1_000


class StreamDef(msgspec.Struct, frozen=True, kw_only=True):
    kind: subjects.Kind
    name: str
    subjects: tuple[str, ...]
    replicas: int = 1
    max_msgs_per_subject: int = 1
    storage: str = "file"
    retention: str = "limits"
    duplicate_window: float = DUPLICATE_WINDOW_SECONDS
    max_consumers: int = MAX_CONSUMERS
    allow_direct: bool = True


class ConsumerDef(msgspec.Struct, frozen=True, kw_only=True):
    stream: str
    durable_name: str
    filter_subject: str
    ack_policy: str = "explicit"
    deliver_policy: str = "all"
    ack_wait: float = ACK_WAIT_SECONDS
    max_deliver: int = -1
    """Never give up on a message: an intent must not be lost because a site was broken for a while."""
    max_ack_pending: int = MAX_ACK_PENDING


def stream_name(kind: subjects.Kind, *, prefix: str = subjects.DEFAULT_PREFIX) -> str:
    """``KB_INTENTS`` for prefix ``kb``; a dotted prefix ``acme.kb`` gives ``ACME_KB_INTENTS``."""
    plural = {
        subjects.Kind.INTENT: "INTENTS",
        subjects.Kind.STATUS: "STATUS",
        subjects.Kind.SECRET: "SECRETS",
        subjects.Kind.SITE: "SITES",
    }[kind]
    base = subjects.check_prefix(prefix).upper().replace(".", "_").replace("-", "_")
    return f"{base}_{plural}"


def all_streams(*, replicas: int = 1, prefix: str = subjects.DEFAULT_PREFIX) -> tuple[StreamDef, ...]:
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    return tuple(
        StreamDef(
            name=stream_name(kind, prefix=prefix),
            subjects=(subjects.globbed(kind, prefix=prefix),),
            kind=kind,
            replicas=replicas,
        )
        for kind in subjects.Kind
    )


def agent_consumer_name(site: str) -> str:
    return f"agent-{site}"


def agent_consumer(site: str, *, prefix: str = subjects.DEFAULT_PREFIX) -> ConsumerDef:
    """The durable pull consumer an agent binds to: its site's intents only."""
    return ConsumerDef(
        stream=stream_name(subjects.Kind.INTENT, prefix=prefix),
        durable_name=agent_consumer_name(site),
        filter_subject=subjects.site_filter(subjects.Kind.INTENT, site, prefix=prefix),
    )


def hub_consumers(*, prefix: str = subjects.DEFAULT_PREFIX) -> tuple[ConsumerDef, ...]:
    """The hub's durable consumers of statuses and sealed secrets, across sites."""
    return (
        ConsumerDef(
            stream=stream_name(subjects.Kind.STATUS, prefix=prefix),
            durable_name="hub-status",
            filter_subject=subjects.globbed(subjects.Kind.STATUS, prefix=prefix),
        ),
        ConsumerDef(
            stream=stream_name(subjects.Kind.SECRET, prefix=prefix),
            durable_name="hub-secrets",
            filter_subject=subjects.globbed(subjects.Kind.SECRET, prefix=prefix),
        ),
    )
