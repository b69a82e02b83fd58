"""Doctor checks of a running process, not of its configuration: is it alive and answering?

``heartbeat`` decides (pure) from the latest heartbeat of a site that ``last_heartbeat`` read
from the bus, against the interval that beat says (``--heartbeat-interval`` for an agent too old
to say it): a Direct Get of ``<prefix>.site.<site>`` in the site's stream, which the site's
own credential is granted (``protocol.permissions.heartbeat_read``), with the server's
timestamp of its arrival. A running agent beats every interval whatever else goes wrong, so an
old beat means a process that is stopped, hung or gone, even while its connections stay open.

``readyz`` decides from what ``get_readyz`` saw at the process's ``/readyz`` (``health_url``
says where, from its ``--listen``). That endpoint is computed from state and answers at once
while the process runs; a stopped process's socket still takes the connection (the kernel
does) and never answers, so the request is bounded and a timeout is said as such.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

import aiohttp

from common import bus, health
from common.bus import errors
from common.doctor import results
from common.doctor.results import Result
from protocol import errors as protocol_errors
from protocol import messages, streams, subjects

HEARTBEAT = "heartbeat fresh"
READYZ = "readyz answered"

READYZ_TIMEOUT = 5.0
"""Seconds to wait for /readyz: a running process answers in milliseconds (it reads its state);
one that has not answered in this long is stopped or hung."""


@dataclass(frozen=True)
class LastBeat:
    """What reading a site's latest heartbeat found."""

    subject: str
    arrived: float | None = None
    """Unix seconds at which it reached the bus (the server's timestamp); None: no beat there."""
    started: dt.datetime | None = None
    """When the agent that sent it started (from the beat itself)."""
    denied: bool = False
    """The server refused the read: a credential minted before it was granted."""
    unreadable: str = ""
    """Why nothing could be read (no stream, no responders), "" when it could."""
    interval: float = 0.0
    """Seconds to the agent's next beat, as the beat says (0: an agent too old to say)."""


def heartbeat(beat: LastBeat, *, now: float, interval: float, site: str, regrant: str) -> Result:
    """PASS for a beat at most ``MISSED_HEARTBEATS`` intervals old, FAIL for an older one or none;
    WARN when the credential may not read it (``regrant`` says how to get one that may)."""
    if beat.denied:
        return results.warned(
            HEARTBEAT,
            f"the credential may not read {beat.subject} (minted before that grant): "
            "whether the agent runs is up to the readyz check",
            regrant,
        )
    if beat.unreadable:
        return results.failed(
            HEARTBEAT,
            f"cannot read {beat.subject}: {beat.unreadable}",
            f"the hub creates site {site}'s stream with its consumer: is the hub running? see its log",
        )
    if beat.arrived is None:
        return results.failed(
            HEARTBEAT,
            f"agent not running: no heartbeat on {beat.subject} yet",
            f"start the agent with these flags; if it runs, its log says why it does not beat "
            f"(and check that it runs with --site {site} and the same --prefix)",
        )
    # The agent's own word on its interval wins over the flag, which is for agents too old to say.
    interval = beat.interval or interval
    age = max(0.0, now - beat.arrived)
    if age > streams.MISSED_HEARTBEATS * interval:
        started = f" (the agent started {_at(beat.started)})" if beat.started is not None else ""
        return results.failed(
            HEARTBEAT,
            f"agent not running or stalled: last heartbeat {age:.0f}s ago, interval {interval:g}s{started}",
            "a running agent beats every --heartbeat-interval: is its process running, and not "
            "stopped (state T in `ps`, after a SIGSTOP) or hung? see its log, and restart it",
        )
    started = f"; agent started {_at(beat.started)}" if beat.started is not None else ""
    return results.passed(HEARTBEAT, f"last heartbeat {age:.1f}s ago, interval {interval:g}s{started}")


def _at(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).isoformat(timespec="seconds")


async def last_heartbeat(conn: bus.Connection, site: str, *, prefix: str) -> LastBeat:
    """The seam: the latest heartbeat of ``site`` on the bus, read by Direct Get."""
    subject = subjects.heartbeat(site, prefix=prefix)
    stream = streams.site_stream_name(site, prefix=prefix)
    try:
        stored = await bus.last_message(conn, stream, subject, direct=True)
    except errors.PermissionDenied:
        return LastBeat(subject, denied=True)
    except errors.Unavailable as exc:  # no responders: the stream is not there, or has no leader
        return LastBeat(subject, unreadable=str(exc))
    if stored is None:
        return LastBeat(subject)
    try:
        sent: messages.Heartbeat | None = messages.decode_heartbeat(stored.data)
    except protocol_errors.DecodeError:
        sent = None
    # The server's timestamp; without it, the agent's own clock is the only hint.
    arrived = stored.time or (sent.sent_at if sent is not None else None)
    return LastBeat(
        subject,
        arrived=arrived.timestamp() if arrived is not None else None,
        started=sent.started_at if sent is not None else None,
        interval=sent.interval if sent is not None else 0.0,
    )


def health_url(listen: str) -> str:
    """Where a process listening on ``listen`` (``--listen``) serves its health endpoints, seen
    from its own host: a wildcard address is reached on the loopback."""
    host, port = health.parse_listen(listen)
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@dataclass(frozen=True)
class Answer:
    """What asking /readyz saw: a status and body, or why there was none."""

    status: int | None = None
    text: str = ""
    failure: Literal["refused", "timeout", "other"] | None = None
    error: str = ""


def readyz(answer: Answer, *, url: str, timeout: float) -> Result:
    """PASS for a 200; FAIL for a 503 (naming the checks that are not ready), a timeout (stopped
    or hung), nothing listening (not running here), or an answer that is not a /readyz."""
    fix = (
        "doctor reads /readyz on the loopback at --listen's port (the process's own host, as with "
        "`kubectl exec`): give --health-url where it runs elsewhere (e.g. a `kubectl port-forward`)"
    )
    if answer.failure == "timeout":
        return results.failed(
            READYZ,
            f"{url} did not answer within {timeout:g}s: the process is stopped or hung "
            "(its socket still takes connections, nothing answers)",
            "a running process answers /readyz at once: is it stopped (state T in `ps`, "
            "after a SIGSTOP) or blocked? see its log, and restart it",
        )
    if answer.failure == "refused":
        return results.failed(
            READYZ, f"nothing listens at {url}: the process is not running here", f"start it; {fix}"
        )
    if answer.failure is not None or answer.status is None:
        return results.failed(READYZ, f"{url}: {answer.error or 'no answer'}", fix)
    rows = [line[4:] for line in answer.text.splitlines() if line.startswith(("[+] ", "[-] "))]
    bad = [line[4:] for line in answer.text.splitlines() if line.startswith("[-] ")]
    if answer.status == 200 and not bad:
        names = ", ".join(r.split(":")[0] for r in rows)
        return results.passed(READYZ, f"{url}: ready ({names})" if names else f"{url}: ready")
    if answer.status == 503:
        return results.failed(
            READYZ,
            f"{url}: not ready: " + ("; ".join(bad) or answer.text.strip()),
            "the process runs and says why it is not ready: see the checks above and its log",
        )
    return results.failed(READYZ, f"{url}: answered {answer.status}, not as a /readyz does", fix)


async def get_readyz(url: str, *, timeout: float) -> Answer:
    """The seam: GET ``url``, no longer than ``timeout`` seconds in all."""
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
            session.get(url) as response,
        ):
            return Answer(status=response.status, text=await response.text())
    except TimeoutError:
        return Answer(failure="timeout")
    except aiohttp.ClientConnectorError as exc:
        refused = isinstance(exc.os_error, ConnectionRefusedError)
        return Answer(failure="refused" if refused else "other", error=str(exc))
    except aiohttp.ClientError as exc:
        return Answer(failure="other", error=f"{type(exc).__name__}: {exc}")
