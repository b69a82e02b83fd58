"""common.bus.permissions: parsing the server's violations and attributing them (pure)."""

from __future__ import annotations

import asyncio

import pytest

from common.bus import errors, permissions


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'nats: permissions violation for publish to "kb.status.site-b.ns.cp"',
            ("publish", "kb.status.site-b.ns.cp"),
        ),
        ('nats: permissions violation for subscription to "kb.intent.>"', ("subscribe", "kb.intent.>")),
        (
            'Permissions Violation for Subscription to "foo" using queue "q"',
            ("subscribe", "foo"),
        ),
        ("nats: stale connection", None),
        ("nats: authorization violation", None),
    ],
)
def test_parse_violation(text: str, expected: tuple[str, str] | None) -> None:
    assert permissions.parse_violation(text) == expected


@pytest.mark.parametrize(
    ("pattern", "subject", "match"),
    [
        ("kb.intent.>", "kb.intent.a.b.c", True),
        ("kb.intent.>", "kb.intent", False),
        ("$JS.API.CONSUMER.*.S.C", "$js.api.consumer.info.s.c", True),
        ("$JS.ACK.S.C.>", "$js.ack.s.c.1.2.3", True),
        ("a.*.c", "a.b.c.d", False),
        ("a.b", "a.b", True),
        ("a.b", "a.c", False),
    ],
)
def test_matches(pattern: str, subject: str, match: bool) -> None:
    assert permissions.matches(pattern, subject) is match


@pytest.mark.parametrize(
    ("pattern", "subject", "restored"),
    [
        (
            "$JS.API.CONSUMER.INFO.KB_INTENTS.agent-b",
            "$js.api.consumer.info.kb_intents.agent-b",
            "$JS.API.CONSUMER.INFO.KB_INTENTS.agent-b",
        ),
        ("_INBOX.>", "_inbox.abc.def", "_INBOX.abc.def"),
        ("$JS.ACK.*.*.S.>", "$js.ack.d.h.s.1", "$JS.ACK.d.h.S.1"),
    ],
)
def test_restore_case(pattern: str, subject: str, restored: str) -> None:
    assert permissions.restore_case(pattern, subject) == restored


async def test_guard_fails_fast_on_a_matching_violation() -> None:
    watch = permissions.Watch()
    never = asyncio.get_running_loop().create_future()

    async def deny_soon() -> None:
        await asyncio.sleep(0.01)
        watch.record("publish", "kb.other")  # not ours: ignored
        watch.record("publish", "kb.status.site-b.ns.cp")

    task = asyncio.create_task(deny_soon())
    with pytest.raises(errors.PermissionDenied) as exc:
        await watch.guard(never, subjects=["kb.status.site-b.ns.cp"])
    await task
    assert exc.value.subject == "kb.status.site-b.ns.cp"
    assert never.cancelled()
    assert watch.seen[-2:] == [("publish", "kb.other"), ("publish", "kb.status.site-b.ns.cp")]


async def test_guard_returns_the_result_when_nothing_is_denied() -> None:
    watch = permissions.Watch()

    async def work() -> int:
        return 42

    assert await watch.guard(work(), subjects=["x"]) == 42
