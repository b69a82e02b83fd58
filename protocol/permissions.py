"""NATS permissions of each identity (DESIGN §4), as data the server configuration is made from.

A site may publish only its own status, sealed secrets and heartbeat subjects, ask its own
consumer for messages and info, and settle (ack) what that consumer delivered, in both forms of
the ack subject the server uses (``$JS.ACK.<stream>.<consumer>.…`` and the domain-qualified
``$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.…``). It may subscribe only below its
own inbox prefix, where JetStream's replies come. Everything else is denied by the server.

One grant beyond DESIGN §4: Direct Get of the latest message on the site's own intent subjects
(``$JS.API.DIRECT.GET.<stream>.<prefix>.intent.<site>.>``), so that anti-entropy can tell a
TenantControlPlane whose intent was purged (an orphan) and re-read the desired spec of a
drifted one, without any right on other sites' subjects.
"""

from __future__ import annotations

import msgspec

from protocol import labels, streams, subjects


class Permissions(msgspec.Struct, frozen=True):
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]


def site_inbox_prefix(site: str) -> str:
    return f"_INBOX_{labels.check(site, field='site')}"


def for_site(site: str, *, prefix: str = subjects.DEFAULT_PREFIX) -> Permissions:
    labels.check(site, field="site")
    intents = streams.intents_stream_name(prefix=prefix)
    consumer = streams.agent_consumer_name(site)
    return Permissions(
        publish=(
            subjects.site_filter(subjects.Kind.STATUS, site, prefix=prefix),
            subjects.site_filter(subjects.Kind.SECRET, site, prefix=prefix),
            subjects.heartbeat(site, prefix=prefix),
            f"$JS.API.CONSUMER.MSG.NEXT.{intents}.{consumer}",
            f"$JS.API.CONSUMER.INFO.{intents}.{consumer}",
            f"$JS.API.DIRECT.GET.{intents}.{subjects.site_filter(subjects.Kind.INTENT, site, prefix=prefix)}",
            f"$JS.ACK.{intents}.{consumer}.>",
            f"$JS.ACK.*.*.{intents}.{consumer}.>",
        ),
        subscribe=(f"{site_inbox_prefix(site)}.>",),
    )


def for_hub(*, prefix: str = subjects.DEFAULT_PREFIX) -> Permissions:
    """The hub publishes intents, runs the JetStream API and settles its own consumers.

    Its inbox is the default ``_INBOX``, whose first token differs from every site's
    ``_INBOX_<site>``, so the hub cannot read a site's replies either.
    """
    # Its consumers are the ``hub`` consumer of every site's stream (one stream per site, created
    # as sites appear): the stream token is a wildcard, the consumer token is exact (no other
    # consumer is ever named ``hub``), and the five tokens after it are exactly those of the
    # ack reply subject nats-server sends (delivered, stream seq, consumer seq, time, pending).
    return Permissions(
        publish=(
            f"{subjects.check_prefix(prefix)}.{subjects.Kind.INTENT.value}.>",
            "$JS.API.>",
            f"$JS.ACK.*.{streams.HUB_CONSUMER}.*.*.*.*.*",
        ),
        subscribe=("_INBOX.>",),
    )
