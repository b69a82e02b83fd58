"""Run-time errors shared by hub and agent (the protocol's own errors live in ``protocol.errors``).

    BusError                    anything the NATS bus could not do
    ├── PermissionDenied        the server refused a publish or subscribe (names the subject)
    ├── NotFound                a stream, consumer or message that does not exist
    │   └── ConsumerNotFound    an agent's durable consumer has not been created by the hub
    ├── WrongLastSequence       an expected-last-subject-sequence check failed (another writer won)
    ├── QuotaExceeded           the server refused a message over a limit (size, count, bytes)
    ├── BusTimeout              no answer in time, after retries (the outcome is unknown)
    └── Unavailable             not connected / JetStream not answering

Library exceptions (nats-py) never escape ``common.bus``: they are translated at that edge.
"""

from __future__ import annotations


class BusError(Exception):
    """Base of every bus error."""


class PermissionDenied(BusError):
    """The server denied an operation. A configuration error, never worth a blind retry."""

    def __init__(self, operation: str, subject: str) -> None:
        super().__init__(
            f"NATS permission denied: {operation} to {subject!r} is not allowed for this user "
            "(check the site's permissions from `kamaji-broker site add` and the credentials in use)"
        )
        self.operation = operation
        self.subject = subject


class NotFound(BusError):
    """A stream, consumer or message does not exist."""


class ConsumerNotFound(NotFound):
    def __init__(self, stream: str, consumer: str) -> None:
        super().__init__(
            f"consumer {consumer!r} on stream {stream!r} does not exist "
            "(the hub creates it when an object references the site, or with --sites)"
        )
        self.stream = stream
        self.consumer = consumer


class WrongLastSequence(BusError):
    def __init__(self, subject: str, expected: int, detail: str) -> None:
        super().__init__(f"publish to {subject!r} expected last sequence {expected}: {detail}")
        self.subject = subject
        self.expected = expected


class QuotaExceeded(BusError):
    """The server refused to store a message: it is over the stream's ``max_msg_size`` or the
    server's ``max_payload``, or the stream (a site's quota) is full. Not worth a blind retry:
    the limit holds until messages are removed or the hub's limits are raised."""

    def __init__(self, subject: str, limit: str, detail: str) -> None:
        super().__init__(f"publish to {subject!r} refused by the server ({limit}): {detail}")
        self.subject = subject
        self.limit = limit
        """Which limit: ``max_msg_size``, ``max_payload``, ``max_msgs`` or ``max_bytes``."""


class BusTimeout(BusError):
    """No answer within the deadline; the operation may or may not have happened."""


class Unavailable(BusError):
    """Not connected, or JetStream does not answer."""
