"""The words of an intent's outcome: what happened to it, why it was refused, how it is settled.

Pure vocabulary, shared by ``intake`` (refusals), ``intents`` (decisions) and the loop (metrics,
logs, settling). ``Result`` values are the ``result`` label of ``kb_agent_intents_total`` and
``Reason`` values the ``reason`` label of ``kb_agent_intents_rejected_total``: renaming one
renames a metric label value that dashboards and alerts read.
"""

from __future__ import annotations

import enum


class Result(enum.StrEnum):
    """What became of one intent (metric label and log word)."""

    APPLIED = "applied"
    UNCHANGED = "unchanged"
    STALE = "stale"
    STALE_GENERATION = "stale_generation"
    DELETED = "deleted"
    REPLACING = "replacing"
    REJECTED = "rejected"
    CONFLICT = "conflict"
    RETRY = "retry"
    SUPERSEDED = "superseded"
    WRONG_SITE = "wrong_site"
    # The coarse results of refused bytes (``intake.Refusal.result``), kept from before the
    # specific reasons.
    UNDECODABLE = "undecodable"
    BAD_SIGNATURE = "bad_signature"
    RETIRED_KEY = "retired_key"
    WRONG_SUBJECT = "wrong_subject"


class Reason(enum.StrEnum):
    """Why the bytes of a delivery are not an intent this agent may act on."""

    OVERSIZED = "oversized"
    UNDECODABLE = "undecodable"
    UNSUPPORTED_SCHEMA = "unsupported_schema"
    INVALID = "invalid"
    UNSIGNED = "unsigned"
    UNTRUSTED_KEY = "untrusted_key"
    RETIRED_KEY = "retired_key"
    BAD_SIGNATURE = "bad_signature"
    WRONG_SITE = "wrong_site"
    WRONG_SUBJECT = "wrong_subject"

    @property
    def result(self) -> Result:
        return _RESULTS[self]


_RESULTS = {
    Reason.OVERSIZED: Result.UNDECODABLE,
    Reason.UNDECODABLE: Result.UNDECODABLE,
    Reason.UNSUPPORTED_SCHEMA: Result.UNDECODABLE,
    Reason.INVALID: Result.UNDECODABLE,
    Reason.UNSIGNED: Result.BAD_SIGNATURE,
    Reason.UNTRUSTED_KEY: Result.BAD_SIGNATURE,
    Reason.RETIRED_KEY: Result.RETIRED_KEY,
    Reason.BAD_SIGNATURE: Result.BAD_SIGNATURE,
    Reason.WRONG_SITE: Result.WRONG_SUBJECT,
    Reason.WRONG_SUBJECT: Result.WRONG_SUBJECT,
}


class Settle(enum.StrEnum):
    """How the message is settled once its outcome is persisted and reported."""

    ACK = "ack"
    """Done: the server forgets it."""
    NAK = "nak"
    """Not yet: redelivered after the decision's ``delay``."""
    TERM = "term"
    """Never: redelivering cannot change the outcome (the server's MSG_TERMINATED advisory records it)."""
