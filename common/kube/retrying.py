"""How long to wait before trying a Kubernetes call again after a transient failure.

Pure. Used by ``watching.stream`` between failed list/watch attempts and by controllers that
retry a failed visit (the sandbox's Kamaji simulator), so every retry on the API backs off alike.
"""

from __future__ import annotations

import random


def backoff(failures: int, *, base: float = 0.2, cap: float = 30.0) -> float:
    """Seconds before attempt ``failures + 1``: ``base`` doubling per failure up to ``cap``, jittered.

    The jitter (0.5 to 1.0 times) keeps clients that failed together from retrying together. The exponent
    is bounded so that a day-long outage cannot overflow the float.
    """
    return random.uniform(0.5, 1.0) * min(cap, base * 2.0 ** min(max(failures, 0), 16))
