"""The NATS bus: the one place that imports nats-py (import-linter enforces it).

connection   connect (NKey seed or .creds, TLS, inbox prefix, reconnect forever), error translation
tls          the SSL context of a CA file, TLS failures in plain words
permissions  server permission violations → PermissionDenied naming the subject
topology     ensure_topology: streams and durable consumers, idempotently (hub only)
publishing   publish with Nats-Msg-Id and optional expected-last-subject-sequence
consuming    bind / fetch / ack / nak / term / in-progress, last message per subject, purge, subjects
"""

from common.bus.connection import Connection, Options, connect, site_inbox_prefix
from common.bus.consuming import (
    Consumer,
    ConsumerState,
    Delivery,
    StoredMessage,
    bind,
    consumer_info,
    in_progress,
    last_message,
    purge_subject,
    subjects_of,
    subscribe_check,
)
from common.bus.publishing import Ack, publish
from common.bus.topology import ensure_topology

__all__ = [
    "Ack",
    "Connection",
    "Consumer",
    "ConsumerState",
    "Delivery",
    "Options",
    "StoredMessage",
    "bind",
    "connect",
    "consumer_info",
    "ensure_topology",
    "in_progress",
    "last_message",
    "publish",
    "purge_subject",
    "site_inbox_prefix",
    "subjects_of",
    "subscribe_check",
]
