"""Permission violations: turn the server's asynchronous ``-ERR`` into a typed, attributed error.

A denied publish or subscribe gets no reply from the server, only an ``-ERR 'Permissions
Violation for Publish to "<subject>"'`` on the connection, which nats-py hands to
``error_cb`` (lower-cased). Left alone, the caller sees a bare timeout. Here each guarded call
registers the subject patterns it touches; a violation on a matching subject fails that call
at once with ``PermissionDenied`` naming the subject. Pure apart from asyncio futures.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

from common.bus import errors

T = TypeVar("T")

_VIOLATION = re.compile(r'permissions violation for (publish|subscription) to "([^"]+)"', re.IGNORECASE)


def parse_violation(text: str) -> tuple[str, str] | None:
    """``("publish" | "subscribe", subject)`` from a server error text, or None."""
    m = _VIOLATION.search(text)
    if m is None:
        return None
    operation = "publish" if m.group(1).lower() == "publish" else "subscribe"
    return operation, m.group(2)


def matches(pattern: str, subject: str) -> bool:
    """NATS subject matching (``*`` one token, ``>`` the rest), case-insensitive because the
    client lower-cases the server's error text."""
    p_tokens = pattern.lower().split(".")
    s_tokens = subject.lower().split(".")
    for i, p in enumerate(p_tokens):
        if p == ">":
            return len(s_tokens) > i
        if i >= len(s_tokens) or (p != "*" and p != s_tokens[i]):
            return False
    return len(p_tokens) == len(s_tokens)


def restore_case(pattern: str, subject: str) -> str:
    """The caller's spelling of a lower-cased ``subject`` matched by ``pattern``: literal tokens
    come from the pattern, wildcard tokens from the subject."""
    p_tokens = pattern.split(".")
    out = []
    for i, token in enumerate(subject.split(".")):
        literal = i < len(p_tokens) and p_tokens[i] not in ("*", ">") and ">" not in p_tokens[: i + 1]
        out.append(p_tokens[i] if literal else token)
    return ".".join(out)


class Watch:
    """Violations seen on one connection, and the calls waiting to hear of them."""

    def __init__(self) -> None:
        self._waiters: dict[int, tuple[tuple[str, ...], asyncio.Future[tuple[str, str]]]] = {}
        """The calls waiting, by a number of their own: a thousand sites' pulls wait at once, and
        each ends with its entry taken out (a list's ``remove`` compared it with every other)."""
        self._next = 0
        self.seen: list[tuple[str, str]] = []
        """Recent violations (operation, subject), newest last, bounded."""

    def record(self, operation: str, subject: str) -> None:
        self.seen = [*self.seen[-99:], (operation, subject)]
        for patterns, future in self._waiters.values():
            if not future.done() and any(matches(p, subject) for p in patterns):
                pattern = next(p for p in patterns if matches(p, subject))
                future.set_result((operation, restore_case(pattern, subject)))

    async def guard(self, call: Awaitable[T], *, subjects: Iterable[str]) -> T:
        """Await ``call``; fail with PermissionDenied as soon as a violation on ``subjects`` arrives."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[str, str]] = loop.create_future()
        number = self._next = self._next + 1
        self._waiters[number] = (tuple(subjects), future)
        task = asyncio.ensure_future(call)
        try:
            waiting: set[asyncio.Future[Any]] = {task, future}
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if future.done():
                operation, subject = future.result()
                raise errors.PermissionDenied(operation, subject)
            return task.result()
        finally:
            del self._waiters[number]
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            elif not task.cancelled():
                task.exception()  # mark it retrieved: when a violation won, that is what we report
