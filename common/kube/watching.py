"""List-then-watch with resume: the informer loop hub and agent build their caches on.

``stream`` yields a ``Synced`` snapshot after every (re)list, then each watch event. It resumes
from the last resourceVersion it saw (bookmarks included) when a watch ends, relists when the
server says the version is gone (410), and backs off and retries on any other error, forever:
a controller never exits because the API server blinked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from common import backoff, logs
from common.kube import errors
from common.kube.answers import WatchEvent
from common.kube.client import Kube
from common.kube.resources import Resource

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Synced:
    """The full current set after a (re)list: objects missing from it were deleted meanwhile."""

    items: list[dict[str, Any]]
    resource_version: str


async def stream(
    kube: Kube,
    r: Resource,
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
    resource_version: str = "",
    watch_timeout: int = 300,
    max_backoff: float = 30.0,
) -> AsyncGenerator[Synced | WatchEvent, None]:
    """``resource_version`` resumes a stream a caller held before (no Synced unless it expired)."""
    failures, about = 0, logs.about(kind=r.kind)
    version = resource_version
    while True:
        try:
            if not version:
                listing = await kube.list(r, namespace=namespace, label_selector=label_selector)
                version = listing.resource_version
                synced = Synced(items=listing.items, resource_version=version)
                # Not held while watching: a listing of 10,000 objects is a hundred megabytes of dicts.
                del listing
                yield synced
                del synced
            events = kube.watch(
                r,
                resource_version=version,
                namespace=namespace,
                label_selector=label_selector,
                timeout_seconds=watch_timeout,
            )
            # Closing this stream (a consumer that stops early) closes the watch with it, so its
            # connection goes back now rather than whenever the abandoned generator is collected.
            async with contextlib.aclosing(events):
                async for event in events:
                    failures = 0
                    version = event.resource_version or version
                    if event.type != "BOOKMARK":
                        yield event
        except errors.Gone:
            log.info("watch of %s expired at resourceVersion %s; relisting", r.plural, version, extra=about)
            version = ""
        except errors.KubeError as exc:
            failures += 1
            delay = backoff.delay(failures, base=0.4, cap=max_backoff)
            log.warning("watch of %s failed (%s); retrying in %.1fs", r.plural, exc, delay, extra=about)
            await asyncio.sleep(delay)
