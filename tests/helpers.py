"""Builders of sample messages and small utilities shared by the test suites."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from common import bus
from protocol import messages, streams, subjects

T0 = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)


def options(url: str, *, seed_file: Path | None = None, inbox_prefix: str = "_INBOX") -> bus.Options:
    return bus.Options(
        servers=(url,),
        seed_file=seed_file,
        inbox_prefix=inbox_prefix,
        request_timeout=2.0,
        reconnect_wait=0.2,
    )


def stream(kind: subjects.Kind, prefix: str) -> str:
    return streams.stream_name(kind, prefix=prefix)


def intent(
    *, site: str = "site-a", namespace: str = "tenants", name: str = "cp1", generation: int = 1, **kw: Any
) -> messages.Intent:
    return messages.Intent(
        op=kw.pop("op", "provision"),
        site=site,
        namespace=namespace,
        name=name,
        owner=messages.Owner(uid="8d1c-uid", namespace="default", name=name, cluster=name),
        generation=generation,
        issued_at=T0,
        spec=kw.pop(
            "spec", {"kubernetes": {"version": "v1.31.0"}, "controlPlane": {"deployment": {"replicas": 2}}}
        ),
        **kw,
    )


def status(
    *, site: str = "site-a", namespace: str = "tenants", name: str = "cp1", **kw: Any
) -> messages.Status:
    return messages.Status(
        site=site,
        namespace=namespace,
        name=name,
        owner_uid="8d1c-uid",
        observed_generation=1,
        intent_seq=7,
        phase=kw.pop("phase", "Ready"),
        version="v1.31.0",
        endpoint=messages.Endpoint(host="10.0.0.1", port=6443),
        replicas=2,
        ready_replicas=2,
        observed_at=T0,
        **kw,
    )


def sealed(*, site: str = "site-a", namespace: str = "tenants", name: str = "cp1") -> messages.SealedSecrets:
    return messages.SealedSecrets(
        site=site,
        namespace=namespace,
        name=name,
        owner_uid="8d1c-uid",
        recipient_key_id="0011223344556677",
        ciphertext=b"\x00\x01sealed",
        checksum="ab" * 32,
        observed_at=T0,
    )


def heartbeat(*, site: str = "site-a") -> messages.Heartbeat:
    return messages.Heartbeat(site=site, agent_version="0.1.0", started_at=T0, sent_at=T0, managed=3, ready=2)


async def eventually(
    check: Callable[[], Awaitable[bool]], *, within: float = 10.0, every: float = 0.05
) -> None:
    """Poll until ``check`` holds; fail with a clear message when it never does."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {within}s")
        await asyncio.sleep(every)
