"""Benchmark of one site's exhaustion attack: what it costs the store and
the hub.

Runs, as real processes, nats-server configured by ``kamaji-broker nats-config`` (sites site-a
and site-b) and ``kamaji-broker hub`` with a per-site quota of 200 messages and 8 MiB, beside an
in-process management-cluster emulator with one RKCP per site. site-a publishes 150 statuses
and 150 valid sealed boxes of ~0.5 MB on distinct subjects, then valid boxes just under the
64 KiB message limit and small statuses until the server refuses. Prints one JSON line: what
was refused and by which limit, what the site's stream holds, and the hub's RSS before the
attack and its peak (VmHWM) after the hub read everything stored. The same scenario is
asserted by tests/security/test_exhaustion.py.

Run: ``.venv/bin/python bench/exhaustion.py``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.security import exhaustion_support as ex  # noqa: E402
from tests.security import intake_support  # noqa: E402


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="kb-exhaustion-") as work:
        async with intake_support.stand(Path(work), hub_flags=ex.HUB_FLAGS) as stand:
            outcome = await ex.attack(stand)
            await ex.site_b_still_served(stand)
            figures = outcome.as_json()
            figures.update(
                bench="exhaustion",
                site_max_msgs=ex.SITE_MAX_MSGS,
                site_max_bytes=ex.SITE_MAX_BYTES,
                hub_rss_before_mib=round(outcome.rss_before / ex.MIB, 1),
                hub_rss_peak_mib=round(outcome.rss_peak / ex.MIB, 1),
                site_b_served=True,
            )
            print(json.dumps(figures))


if __name__ == "__main__":
    asyncio.run(main())
