"""What one survey of KB_INTENTS says about the hub's record of the intent subjects.

The hub keeps its record of every intent subject current by its own writes (one leader
writes). Anyone holding the hub's NATS credentials can still write behind its back: publish
over a subject (a replayed intent), purge a subject or delete a message. Rather than read every
subject again on a timer, the hub surveys the stream once per interval: its state (messages,
first and last sequence), one request. ``judge`` compares two surveys with the sequences the
hub wrote in between:

- nothing moved: nothing to do (the cost at rest is that one request);
- a sequence the hub did not write: someone published; the message at each such sequence is
  read and its subject's record read again;
- anything moved at all: the subject list is taken (one request) and compared with the record,
  which finds a purged or deleted subject;
- the last sequence went back, or more foreign sequences than are worth reading one by one:
  the stream was made again or flooded; every record is read again.

Pure: the shell (``hub.controllers.rkcp.published``) does the reading.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

FOREIGN_READ_LIMIT = 256
"""Foreign sequences read one by one in one survey; past it every record is read again."""


@dataclass(frozen=True)
class Mark:
    """The state of the stream at one survey."""

    messages: int
    first_seq: int
    last_seq: int


@dataclass(frozen=True)
class Verdict:
    everything: bool = False
    """Read every record again (the stream was made again, or flooded)."""
    foreign: tuple[int, ...] = ()
    """Sequences the hub did not write: read the message at each and its subject again."""
    compare: bool = False
    """Take the subject list and compare it with the record (a purge or a delete shows there)."""


def judge(
    before: Mark | None, now: Mark, own: Collection[int], *, limit: int = FOREIGN_READ_LIMIT
) -> Verdict:
    """What to check, from the survey ``before``, the survey ``now`` and the sequences the hub
    wrote since ``before`` (``own``). The first survey is the baseline: nothing to check, every
    record having been read from the stream on its first use."""
    if before is None or now == before:
        return Verdict()
    if now.last_seq < before.last_seq:
        return Verdict(everything=True)
    foreign: list[int] = []
    for seq in range(before.last_seq + 1, now.last_seq + 1):
        if seq not in own:
            foreign.append(seq)
            if len(foreign) > limit:
                return Verdict(everything=True)
    return Verdict(foreign=tuple(foreign), compare=True)
