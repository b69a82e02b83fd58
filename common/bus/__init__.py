"""The NATS bus: the one place that imports nats-py (import-linter enforces it).

connection   Connection (the nats-py client and JetStream context, private), subscribe, sync,
             close; error translation (``translate``)
connecting   connect (NKey seed or .creds, TLS, inbox prefix, retry, reconnect forever)
flushing     round trips (PING, PONG) never cancelled: nats-py's reader stops on a late PONG
             of a cancelled one
errors       BusError → PermissionDenied | NotFound | WrongLastSequence | QuotaExceeded | ...
tls          the SSL context of a CA file, TLS failures in plain words
permissions  server permission violations → PermissionDenied naming the subject
topology     ensure_topology: streams and durable consumers, idempotently (hub only); delete_stream
publishing   publish with Nats-Msg-Id and optional expected-last-subject-sequence
consuming    bind / fetch / ack / nak / term / in-progress / replay, consumer info
pulling      the pull requests behind fetch: one left open serves many fetches
storage      stream info, last message per subject, purge, subjects
identity     a JWT identity held in memory (an agent's, renewed) or minted by the process itself
             (the hub's)
"""

from common.bus.connecting import connect
from common.bus.connection import Connection, Identity, Message, Options, Subscription, site_inbox_prefix
from common.bus.consuming import (
    Consumer,
    ConsumerState,
    Delivery,
    bind,
    consumer_info,
    in_progress,
    replay,
)
from common.bus.publishing import Ack, publish
from common.bus.storage import (
    StoredMessage,
    StreamState,
    last_message,
    message_at,
    purge_subject,
    stream_info,
    subjects_of,
    subjects_since,
)
from common.bus.topology import ensure_topology

__all__ = [
    "Ack",
    "Connection",
    "Consumer",
    "ConsumerState",
    "Delivery",
    "Identity",
    "Message",
    "Options",
    "StoredMessage",
    "StreamState",
    "Subscription",
    "bind",
    "connect",
    "consumer_info",
    "ensure_topology",
    "in_progress",
    "last_message",
    "message_at",
    "publish",
    "purge_subject",
    "replay",
    "site_inbox_prefix",
    "stream_info",
    "subjects_of",
    "subjects_since",
]
