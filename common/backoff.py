"""How long to wait before trying again after a failure: the one backoff of hub, agent and sandbox.

Pure. Every retry loop (NATS binds and fetches, Kubernetes list/watch, supervised tasks, status
publishes, redelivery of intents) asks ``delay`` so that they all back off alike.
"""

from __future__ import annotations

import random


def delay(failures: int, *, base: float, cap: float, jitter: bool = True) -> float:
    """Seconds before attempt ``failures + 1``: ``base`` after the first failure, doubling per
    failure, at most ``cap``; none before the first failure.

    With ``jitter`` the delay is 0.5 to 1.0 times that, so that clients that failed together (every
    agent when NATS restarts) do not come back in step; without it the delay is exact (a NAK delay
    the server applies, which tests and operators read as a schedule). The exponent is bounded, so
    a day-long outage cannot overflow the float.
    """
    if failures <= 0:
        return 0.0
    exact = min(cap, base * 2.0 ** min(failures - 1, 32))
    return exact * random.uniform(0.5, 1.0) if jitter else exact
