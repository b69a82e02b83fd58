"""The reads of a site's stream as the server sees them: which subjects' stored messages were asked for.

A client of its own subscribes to the JetStream API (``$JS.API.>``) and keeps the message gets
of one stream (``$JS.API.STREAM.MSG.GET.<stream>`` and ``$JS.API.DIRECT.GET.<stream>[.<subject>]``),
so what is counted is what reached the server, whoever sent it: nothing of ours is patched.
One subscription delivers in the order the server handled the requests, so once a read the test
makes itself (``mark``) has come back, every read handled before it has too.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator

from common import bus
from tests import helpers

MSG_GET = "$JS.API.STREAM.MSG.GET."
DIRECT_GET = "$JS.API.DIRECT.GET."


class StreamReads:
    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.seen: list[str] = []
        """The subject of every get of ``stream``, in the order the server handled them."""
        self._marked = 0

    async def on_request(self, msg: bus.Message) -> None:
        if msg.subject == MSG_GET + self.stream or msg.subject == DIRECT_GET + self.stream:
            request = json.loads(msg.data or b"{}")
            self.seen.append(request.get("last_by_subj") or f"seq {request.get('seq')}")
        elif msg.subject.startswith(f"{DIRECT_GET}{self.stream}."):
            self.seen.append(msg.subject.removeprefix(f"{DIRECT_GET}{self.stream}."))

    async def mark(self, conn: bus.Connection) -> list[str]:
        """The subjects read since the previous mark: reads ``conn`` a subject of its own and
        waits until that read is seen (so everything handled before it is counted)."""
        marker = f"marker.{uuid.uuid4().hex}"
        await bus.last_message(conn, self.stream, marker)
        await helpers.eventually(lambda: marker in self.seen, what=f"the read of {marker} seen")
        end = self.seen.index(marker)
        since, self._marked = self.seen[self._marked : end], end + 1
        return since


@contextlib.asynccontextmanager
async def watching(url: str, stream: str) -> AsyncIterator[StreamReads]:
    """Count the reads of ``stream`` on the server at ``url`` while in the block."""
    reads = StreamReads(stream)
    watcher = await bus.connect(helpers.options(url), deadline=10)
    try:
        await watcher.subscribe("$JS.API.>", reads.on_request)
        yield reads
    finally:
        await watcher.close()
