"""NATS permissions of each identity, as data the server configuration is made from,
and ``intersects``, the subject-pattern test that proves them (tests/security/test_grants.py).

Every grant has an exact token count: no ``>``, and no ``*`` where a longer or differently
shaped subject could reach something else. This matters most for ack subjects. The server
subscribes each consumer to ``$JS.ACK.<stream>.<consumer>.>``, and a ``+NXT`` body published on
any subject that subscription matches is a pull request on that consumer: a grant of the form
``$JS.ACK.*.*.<intents>.agent-<site>.>`` would also match the ack subjects of another stream's
consumer whose name ends in those tokens, so a site could pull (read, and starve until
ack-wait) messages that are not its own.

A site may publish:

- its own data subjects, with the exact shape of ``protocol.subjects``:
  ``<prefix>.status.<site>.*.*``, ``<prefix>.secret.<site>.*.*``, ``<prefix>.site.<site>``;
- the JetStream API of its own consumer: ``$JS.API.CONSUMER.MSG.NEXT|INFO|RESET.<intents>.
  agent-<site>`` (no create, update or delete: the hub makes consumers). RESET (nats-server
  2.14+) moves only this consumer's own position: the agent replays its current intents when it
  starts, its relist (so that a TCP deleted while the agent was down is recreated);
- the ack subjects of its own consumer, in the one form nats-server sends
  (``$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<timestamp>.<pending>``,
  nine tokens; checked against nats-server 2.15, which sends it with or without a JetStream
  domain, so the twelve-token domain form is not granted: a server that sent it would fail
  the agent's acks loudly, with a PermissionDenied naming the subject, and the positive tests
  in tests/common/bus/test_permissions.py and tests/security/test_nats_attacks.py);
- Direct Get of the latest message on its own intent subjects
  (``$JS.API.DIRECT.GET.<intents>.<prefix>.intent.<site>.*.*``), beyond what applying needs, so
  that anti-entropy can tell a TenantControlPlane whose intent was purged (an orphan) and
  re-read the desired spec of a drifted one. (A request body on these subjects selects
  nothing else: the server answers 408 Bad Request.)
- Direct Get of its own latest heartbeat (``heartbeat_read``: ``$JS.API.DIRECT.GET.<site
  stream>.<prefix>.site.<site>``), one exact subject, so that ``kamaji-broker doctor agent``,
  run with the agent's own credential, can tell a running agent from a stopped one by the age
  of its last beat. It reads back only what the site itself published, and none of its
  statuses or sealed secrets; the agent itself never uses it, so a credential minted before it
  existed still works (doctor says what it cannot read).

It may subscribe only below its own inbox prefix ``_INBOX_<site>``, where JetStream's replies
come. Everything else is denied by the server.

A site's bootstrap credential has an inbox of its own, ``_INBOX_BOOTSTRAP_<site>``: a bootstrap
credential is handed around (a Secret, a file) and more than one may be valid at once, so an
unused copy must not read what arrives in the agent's inbox (its intents, its renewed JWT).

The hub publishes intents (``<prefix>.intent.*.*.*``) and uses the whole JetStream API (it
creates and administers the streams and every consumer); its consumers of the site streams take
no acks, so it has no ``$JS.ACK`` grant at all. Its inbox is the default ``_INBOX``, whose first
token differs from every site's ``_INBOX_<site>``.
"""

from __future__ import annotations

import msgspec

from protocol import labels, streams, subjects

ACK_REPLY_TOKENS = 5
"""Tokens after ``$JS.ACK.<stream>.<consumer>`` in the ack reply subject the server sends:
delivered count, stream sequence, consumer sequence, timestamp, pending."""


class Permissions(msgspec.Struct, frozen=True):
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    reply_to_requests: bool = False
    """May publish one reply to the reply subject of a request it received (NATS's
    ``allow_responses``), whatever that subject: the hub's credential service answers this way."""


def site_inbox_prefix(site: str) -> str:
    return f"_INBOX_{labels.check(site, field='site')}"


def bootstrap_inbox_prefix(site: str) -> str:
    """The inbox of ``site``'s bootstrap credentials. Its first token is no site's
    ``_INBOX_<site>`` (a site name is a DNS label: lower case, no underscore) and not the
    observer's, so a bootstrap credential reads no reply but its own kind's."""
    return f"_INBOX_BOOTSTRAP_{labels.check(site, field='site')}"


def ack_subjects(consumer: streams.ConsumerDef) -> str:
    """Exactly the ack reply subjects of ``consumer``'s deliveries:
    ``$JS.ACK.<stream>.<consumer>.*.*.*.*.*``."""
    return ".".join(("$JS.ACK", consumer.stream, consumer.durable_name, *("*",) * ACK_REPLY_TOKENS))


def heartbeat_read(site: str, *, prefix: str = subjects.DEFAULT_PREFIX) -> str:
    """The Direct Get of ``site``'s latest heartbeat, in its own stream: the one read a site's
    grants allow on that stream."""
    stream = streams.site_stream_name(site, prefix=prefix)
    return f"$JS.API.DIRECT.GET.{stream}.{subjects.heartbeat(site, prefix=prefix)}"


def for_site(site: str, *, prefix: str = subjects.DEFAULT_PREFIX) -> Permissions:
    labels.check(site, field="site")
    consumer = streams.agent_consumer(site, prefix=prefix)
    own = f"{consumer.stream}.{consumer.durable_name}"
    own_intents = subjects.site_filter(subjects.Kind.INTENT, site, prefix=prefix)
    return Permissions(
        publish=(
            subjects.site_filter(subjects.Kind.STATUS, site, prefix=prefix),
            subjects.site_filter(subjects.Kind.SECRET, site, prefix=prefix),
            subjects.site_filter(subjects.Kind.SITE, site, prefix=prefix),
            f"$JS.API.CONSUMER.MSG.NEXT.{own}",
            f"$JS.API.CONSUMER.INFO.{own}",
            f"$JS.API.CONSUMER.RESET.{own}",
            f"$JS.API.DIRECT.GET.{consumer.stream}.{own_intents}",
            heartbeat_read(site, prefix=prefix),
            ack_subjects(consumer),
            subjects.service(subjects.Service.RENEW, site, prefix=prefix),
        ),
        subscribe=(f"{site_inbox_prefix(site)}.>",),
    )


def for_bootstrap(site: str, *, prefix: str = subjects.DEFAULT_PREFIX) -> Permissions:
    """A site's bootstrap credential (operator mode): it may ask the hub, once, for the site's
    first credential on ``<prefix>.bootstrap.<site>``, and read the answer in the bootstrap
    inbox (never the site's own)."""
    return Permissions(
        publish=(subjects.service(subjects.Service.BOOTSTRAP, site, prefix=prefix),),
        subscribe=(f"{bootstrap_inbox_prefix(site)}.>",),
    )


def for_hub(*, prefix: str = subjects.DEFAULT_PREFIX) -> Permissions:
    """The hub publishes intents and runs the JetStream API.

    It settles nothing: its consumers (``hub`` on every site's stream) have no acks, so it has
    no ``$JS.ACK`` grant at all, and no ack subject can be used to pull through it either. Its
    inbox is the default ``_INBOX``, whose first token differs from every site's
    ``_INBOX_<site>``, so the hub cannot read a site's replies either.
    """
    return Permissions(
        publish=(subjects.globbed(subjects.Kind.INTENT, prefix=prefix), "$JS.API.>"),
        subscribe=(
            "_INBOX.>",
            subjects.service_globbed(subjects.Service.BOOTSTRAP, prefix=prefix),
            subjects.service_globbed(subjects.Service.RENEW, prefix=prefix),
        ),
        reply_to_requests=True,
    )


OBSERVER_INBOX = "_INBOX_OBSERVER"
"""The observer's inbox prefix: upper case, so no site's ``_INBOX_<site>`` (a DNS label) is it."""


def for_observer(*, prefix: str = subjects.DEFAULT_PREFIX) -> Permissions:
    """``kamaji-broker status``: read-only, and only what the fleet view needs.

    - the info of every consumer (``$JS.API.CONSUMER.INFO.<stream>.<consumer>``): each agent's
      backlog and the hub's lag, as counts and positions; no message content;
    - Direct Get of the latest heartbeat of each site (``$JS.API.DIRECT.GET.<stream>.<prefix>.
      site.<site>``): agent version, trusted key ids, when it last beat. Only heartbeat subjects:
      intents, statuses and sealed secrets stay unreadable, and a request body on this form
      selects nothing else (the server answers 408).

    Nothing to publish on a data subject, no consumer or stream administration, no pulls, no
    acks; it subscribes only below its own inbox.
    """
    return Permissions(
        publish=(
            "$JS.API.CONSUMER.INFO.*.*",
            f"$JS.API.DIRECT.GET.*.{subjects.globbed(subjects.Kind.SITE, prefix=prefix)}",
        ),
        subscribe=(f"{OBSERVER_INBOX}.>",),
    )


def intersects(a: str, b: str) -> bool:
    """Whether some concrete subject matches both NATS subject patterns ``a`` and ``b``.

    ``*`` stands for one token and ``>`` (last token only) for one or more; any other token is
    literal. Two patterns share a subject when, position by position, their tokens are equal
    or one is a wildcard, and they have the same number of tokens unless a ``>`` absorbs the
    rest (it needs at least one token on the other side).
    """
    ta, tb = _tokens(a), _tokens(b)
    for i in range(max(len(ta), len(tb))):
        if i >= len(ta) or i >= len(tb):
            return False
        x, y = ta[i], tb[i]
        if x == ">" or y == ">":
            return True
        if x != y and "*" not in (x, y):
            return False
    return True


def _tokens(pattern: str) -> list[str]:
    tokens = pattern.split(".")
    if any(not t or t != t.strip() or any(c.isspace() for c in t) for t in tokens):
        raise ValueError(f"subject pattern {pattern!r} has an empty or blank token")
    if ">" in tokens[:-1]:
        raise ValueError(f"subject pattern {pattern!r}: '>' must be the last token")
    return tokens
