"""Whether the hub saw every message its consumer of a site's stream delivered (pure, no I/O).

The hub's consumers have no acks (``protocol.streams.hub_consumer``): the server sends each
message once, so one lost in flight (a connection that broke while it was sent, a slow-consumer
drop) or taken by another process holding the same credentials (two hub processes overlapping
at a leader change) is never sent again. Every delivery carries the consumer's sequence, one more
per message sent, so this tracks, per stream, the last one the hub saw and says when the server
sent more than that: a delivery that skips some, a binding whose consumer delivered more than
was seen (or fewer: it was created again), and, for the last message of a quiet stream, which
nothing follows, the consumer's own count when ``consumer`` checks it while idle. Each answer is
the reason to give (``hub.ingest.consumer`` then forgets that site and reads its stream again) or None.
"""

from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass
class _Stream:
    seen: int
    checked_at: float = -math.inf
    reconnects: int = -1


class Continuity:
    def __init__(self, *, check_interval: float) -> None:
        self.check_interval = check_interval
        """Seconds between checks of a quiet stream's count (at once after a reconnect)."""
        self._streams: dict[str, _Stream] = {}

    def delivered(self, stream: str, seq: int) -> str | None:
        """A delivery at consumer sequence ``seq``: why messages went by unseen, or None. A
        sequence at or below the last seen is no gap (sent again after a server restart, or one
        already counted by a check)."""
        state = self._streams.setdefault(stream, _Stream(seen=seq))
        last, state.seen = state.seen, seq
        return f"delivery {seq} follows {last}" if seq > last + 1 else None

    def bound(self, stream: str, delivered: int) -> str | None:
        """A binding whose consumer has delivered ``delivered`` so far: None when that is what
        this process saw (or it saw nothing yet: a first binding needs no reading again)."""
        state = self._streams.get(stream)
        if state is None:
            self._streams[stream] = _Stream(seen=delivered)
            return None
        last, state.seen = state.seen, delivered
        return None if delivered == last else f"the consumer delivered up to {delivered}, this hub saw {last}"

    def check_due(self, stream: str, *, now: float, reconnects: int) -> bool:
        """Whether a quiet stream's count is to be checked: after a reconnect, or when the last
        check is ``check_interval`` old."""
        state = self._streams.get(stream)
        if state is None:
            return False
        return reconnects != state.reconnects or now - state.checked_at >= self.check_interval

    def checked(self, stream: str, delivered: int, *, now: float, reconnects: int) -> str | None:
        """The consumer's count, read at ``now``: why messages went by unseen, or None. A count
        above the last seen may also be a message still on its way (read again, harmlessly;
        it is not taken for a gap when it arrives)."""
        state = self._streams.setdefault(stream, _Stream(seen=delivered))
        state.checked_at, state.reconnects = now, reconnects
        if delivered <= state.seen:
            return None
        last, state.seen = state.seen, delivered
        return f"the consumer delivered up to {delivered}, this hub saw {last}"
