"""What a site's link does to its packets, one direction at a time: pure, tested by tables.

``Shape`` is one direction, in tc netem's terms: a delay, a jitter around it, a share of packets
lost, or down (every packet dropped: a partition). ``out`` is what leaves the site (the agent's
publishes), ``in`` what reaches it. ``request`` is the line ``linkshaper`` reads to change
either direction, ``answer`` reads the line it answers with: what each direction did so far.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Final

__all__ = ["CLEAR", "DOWN", "MAX_DELAY", "Counts", "LinkError", "Shape", "answer", "request"]

MAX_DELAY: Final = 60.0
"""Seconds: the longest delay linkshaper takes (a longer one is a cut)."""


class LinkError(RuntimeError):
    """linkshaper refused a change or could not be reached: the message says which and why."""


@dataclass(frozen=True)
class Shape:
    """One direction of a link. Delays are in seconds; ``jitter`` moves each packet's delay
    up or down by at most that much (packets stay in order, as on a real link)."""

    delay: float = 0.0
    jitter: float = 0.0
    loss: float = 0.0
    """The share of packets dropped at random, 0 to 1."""
    down: bool = False

    def __post_init__(self) -> None:
        for name in ("delay", "jitter", "loss"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"link shape: {name} must be a finite number, got {getattr(self, name)!r}")
        if not 0 <= self.delay <= MAX_DELAY:
            raise ValueError(f"link shape: delay must be between 0 and {MAX_DELAY:g} s, got {self.delay:g}")
        if not 0 <= self.jitter <= self.delay:
            raise ValueError(
                f"link shape: jitter must be between 0 and the delay ({self.delay:g} s), got {self.jitter:g}"
            )
        if not 0 <= self.loss <= 1:
            raise ValueError(f"link shape: loss must be between 0 and 1, got {self.loss:g}")

    def wire(self) -> dict[str, object]:
        return {
            "delay_ms": round(self.delay * 1000, 3),
            "jitter_ms": round(self.jitter * 1000, 3),
            "loss": self.loss,
            "down": self.down,
        }


CLEAR: Final = Shape()
"""Packets pass at once, none lost."""
DOWN: Final = Shape(down=True)
"""Every packet dropped, without a word to either end (no reset): a partition."""


@dataclass(frozen=True)
class Counts:
    """What one direction did with its packets since linkshaper started."""

    passed: int = 0
    dropped: int = 0


def request(*, out: Shape | None = None, into: Shape | None = None) -> bytes:
    """The line that sets ``out`` and ``into`` (``None``: left as it is; neither: a question)."""
    body = {name: s.wire() for name, s in (("out", out), ("in", into)) if s is not None}
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


def answer(line: bytes) -> tuple[Counts, Counts]:
    """The counts of ``out`` and ``in`` in linkshaper's answer; ``LinkError`` with its reason
    when it refused, or when the line is no answer of its."""
    try:
        body = json.loads(line)
        if not isinstance(body, dict):
            raise TypeError(type(body).__name__)
        if body.get("ok") is not True:
            raise LinkError(f"linkshaper refused the change: {body.get('error') or 'no reason given'}")
        return _counts(body["out"]), _counts(body["in"])
    except (ValueError, TypeError, KeyError) as exc:
        raise LinkError(f"linkshaper answered {line[:200]!r}, not its answer ({exc})") from None


def _counts(raw: object) -> Counts:
    if not isinstance(raw, dict):
        raise TypeError(f"counts are {type(raw).__name__}")
    passed, dropped = raw.get("passed"), raw.get("dropped")
    if not isinstance(passed, int) or not isinstance(dropped, int):
        raise TypeError(f"counts {raw!r}")
    return Counts(passed=passed, dropped=dropped)
