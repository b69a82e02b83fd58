"""What the cleanup loop reads from NATS: the latest intent on a TCP's subject, verified, and
whether the agent's consumer is caught up.

The intent stream keeps one message per subject, so its last message is the hub's current wish
for that TCP. ``IntentReader`` reads it with Direct Get (the only stream read a site is granted
besides its consumer), verifies the signature, and checks with ``intake.misplaced`` that the
body names the site and subject it was found on; at most ``concurrency`` reads are in flight,
so a pass over thousands of TCPs does not flood the server.

Talks to NATS only (``common.bus.last_message``, ``consumer_info``). Logs name subjects, never bodies.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from agent.apply import intake
from agent.cleanup import orphans
from agent.deps import Deps
from agent.settings import AgentSettings
from common import bus, logs, objects
from protocol import errors as protocol_errors
from protocol import signing, streams, subjects
from protocol.coordinates import Coordinates

log = logging.getLogger(__name__)


async def consumer_caught_up(
    conn: bus.Connection, definition: streams.ConsumerDef, apply_idle: Callable[[], bool]
) -> bool:
    """True when the apply loop is idle and the server holds nothing undelivered or unacked for it.

    Both sides are asked: the server knows about intents not yet fetched, the apply loop about
    ones fetched and still being applied. ``apply_idle`` is asked again after the server answered,
    so an intent fetched during the call is not missed.
    """
    if not apply_idle():
        return False
    state = await bus.consumer_info(conn, definition.stream, definition.durable_name)
    return state.num_pending == 0 and state.num_ack_pending == 0 and apply_idle()


class IntentReader:
    def __init__(self, settings: AgentSettings, deps: Deps, *, concurrency: int = 32) -> None:
        self.conn = deps.conn
        self.trusted = deps.hub_keys.verify_keys()
        self.site = settings.site
        self.prefix = settings.prefix
        self.concurrency = concurrency
        """Direct Gets in flight at once."""
        self.stream = streams.stream_name(subjects.Kind.INTENT, prefix=settings.prefix)

    async def present(self, namespace: str, name: str) -> bool:
        """Whether the TCP's subject holds any message (verified or not)."""
        subject = subjects.intent(self.site, namespace, name, prefix=self.prefix)
        return await bus.last_message(self.conn, self.stream, subject, direct=True) is not None

    async def latest(self, namespace: str, name: str) -> orphans.Found:
        """The verified latest intent for the TCP ``namespace/name``; raises BusError."""
        try:
            subject = subjects.intent(self.site, namespace, name, prefix=self.prefix)
        except protocol_errors.SubjectError as exc:
            # Labelled as ours by someone else (we only ever create label-named TCPs): hands off.
            return orphans.Unverifiable(str(exc))
        stored = await bus.last_message(self.conn, self.stream, subject, direct=True)
        if stored is None:
            return None
        try:
            intent = signing.verify(stored.data, self.trusted)
        except (protocol_errors.DecodeError, protocol_errors.SignatureError) as exc:
            why = str(exc)
        else:
            refusal = intake.misplaced(intent, site=self.site, subject=subject, prefix=self.prefix)
            if refusal is None:
                return orphans.Latest(intent=intent, seq=stored.seq)
            why = refusal.message
        about = logs.about_tcp(Coordinates(self.site, namespace, name), seq=stored.seq)
        log.warning(
            "latest intent on %s (seq %d): %s; not touching it", subject, stored.seq, why, extra=about
        )
        return orphans.Unverifiable(why)

    async def latest_of(self, found: Iterable[Mapping[str, Any]]) -> list[orphans.Found]:
        """``latest`` of each TCP in ``found``, in order; raises the first error once all ended."""
        gate = asyncio.Semaphore(self.concurrency)

        async def one(call: Awaitable[orphans.Found]) -> orphans.Found:
            async with gate:
                return await call

        calls = [self.latest(*objects.key(tcp)) for tcp in found]
        # return_exceptions: let every read finish (none left running unobserved), then fail
        # the pass on the first error.
        results = await asyncio.gather(*(one(c) for c in calls), return_exceptions=True)
        out: list[orphans.Found] = []
        for result in results:
            if isinstance(result, BaseException):
                raise result
            out.append(result)
        return out
