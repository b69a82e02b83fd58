"""Child processes of the sandbox and what runs beside it (the real clusters, Kamaji and Cluster
API too): start one command, wait until it serves, stop it by PID.

Owns the lifetime of one OS process of the system (nats-server, an API emulator, a Kamaji
simulator, the hub, an agent): its command line, its log file, the readiness wait (``/readyz``
answers 200, or a line in its log says it serves) and the shutdown (SIGTERM, then SIGKILL after
a timeout). Talks to the operating system and, for readiness, to the child's health port.

Every child runs in a process group of its own. Why: Ctrl-C in a terminal signals the whole
foreground group; the launcher must receive it alone, so that it can stop the children in
order (agents and hub before the API servers and NATS they talk to) instead of all at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import ssl
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

__all__ = ["Child", "LaunchError", "child_env", "errors", "last_error", "run", "tail"]

# What an error looks like in each child's log: the hub's and agents' JSON or text lines, Python
# logging (emulators, simulators), a traceback's final line, nats-server's [ERR].
_ERROR = re.compile(
    r'"level": "(error|critical)"|^\S+Z (error|critical) '
    r"|\b(ERROR|CRITICAL)\b|\[ERR\]|^[\w.]+(Error|Exception): "
)


class LaunchError(RuntimeError):
    """A part of the system could not be set up or did not become ready; the message says which
    and points at its log."""


def tail(path: Path, *, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file (empty when there is none), for error messages."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def errors(path: Path, offset: int = 0) -> list[str]:
    """Every line of a log after byte ``offset`` that reports an error, cut to 300 characters."""
    try:
        with open(path, "rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
    except FileNotFoundError:
        return []
    return [line.strip()[:300] for line in text.splitlines() if _ERROR.search(line)]


def last_error(path: Path) -> str:
    """The last line of a log that reports an error (empty when none), cut to 300 characters."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return ""
    for line in reversed(lines):
        if _ERROR.search(line):
            return line.strip()[:300]
    return ""


@dataclass
class Child:
    """One long-running child process of the system.

    Ready when ``health_url`` + ``/readyz`` answers 200 (hub, agents) or, for processes without
    a health port, when ``ready_text`` appears in its log (emulators, simulators). Either way a
    child that exits while starting fails the wait at once, with the end of its log.
    """

    name: str
    args: Sequence[str]
    log: Path
    env: Mapping[str, str] | None = None
    health_url: str | None = None
    ready_text: str | None = None
    health_tls: ssl.SSLContext | None = None
    """How to verify an ``https`` ``health_url`` (a kube-apiserver's, with its cluster's CA)."""
    process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _log_start: int = field(default=0, init=False, repr=False)
    injected: bool = field(default=False, init=False)
    """True while the process is down (or stopped) because a fault was injected on purpose:
    ``System.failures`` does not count that exit as a crash."""

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def returncode(self) -> int | None:
        """None while it runs (or before it started)."""
        return self.process.poll() if self.process is not None else None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        # A start again appends to the log: readiness is read from here on, not from the
        # earlier run's "ready" line.
        self._log_start = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                list(self.args),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(self.env) if self.env is not None else None,
                process_group=0,
            )

    async def wait_ready(self, *, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last = "not started"
        connector = aiohttp.TCPConnector(ssl=self.health_tls) if self.health_tls is not None else None
        async with aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=2), connector=connector
        ) as session:
            while True:
                code = self.returncode
                if self.process is None or code is not None:
                    raise LaunchError(
                        f"{self.name} exited with code {code} while starting; "
                        f"end of {self.log}:\n{tail(self.log)}"
                    )
                ok, last = await self._probe(session)
                if ok:
                    return
                if loop.time() > deadline:
                    raise LaunchError(
                        f"{self.name} was not ready within {timeout:g}s ({last}); "
                        f"end of {self.log}:\n{tail(self.log)}"
                    )
                await asyncio.sleep(0.1)

    async def _probe(self, session: aiohttp.ClientSession) -> tuple[bool, str]:
        if self.health_url is not None:
            try:
                async with session.get(f"{self.health_url}/readyz") as response:
                    text = await response.text()
                    return response.status == 200, " ".join(text.split())
            except (aiohttp.ClientError, TimeoutError) as exc:
                return False, f"{self.health_url}/readyz: {type(exc).__name__}"
        if self.ready_text is not None:
            text = self.log.read_bytes()[self._log_start :].decode(errors="replace")
            found = self.ready_text in text
            return found, f"waiting for {self.ready_text!r} in its log"
        return True, ""

    async def kill(self) -> int | None:
        """SIGKILL (no cleanup, as a crash or an OOM kill would leave things) and reap it."""
        if self.process is None:
            return None
        self.injected = True
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        await asyncio.to_thread(self.process.wait)
        return self.process.returncode

    def pause(self) -> None:
        """SIGSTOP: the process holds its connections and sockets but answers nothing."""
        if self.process is not None and self.process.poll() is None:
            self.injected = True
            self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after ``pause``."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.injected = False

    async def start_again(self, *, timeout: float) -> None:
        """Start the same command again (same flags, ports, store, log appended) after it
        exited, and wait until it is ready."""
        if self.process is not None and self.process.poll() is None:
            raise LaunchError(f"{self.name} (pid {self.pid}) still runs; kill it first")
        self.start()
        self.injected = False
        await self.wait_ready(timeout=timeout)

    def terminate(self) -> None:
        """Send SIGTERM (every child stops cleanly on it) if it still runs; a paused child is
        continued first, or it would only die at the SIGKILL."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
                self.process.send_signal(signal.SIGCONT)

    async def wait_stopped(self, *, timeout: float) -> int | None:
        """Wait up to ``timeout`` seconds after ``terminate``, then SIGKILL; the exit code."""
        if self.process is None:
            return None
        try:
            await asyncio.to_thread(self.process.wait, timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            # SIGKILL cannot be ignored: this returns at once (the wait only reaps it).
            await asyncio.to_thread(self.process.wait)
        return self.process.returncode


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the hub's and agents' settings variables, plus ``extra``.

    Why: a ``KB_HUB_*`` or ``KB_AGENT_*`` variable left in the user's shell (say
    ``KB_HUB_LEADER_ELECT``) would silently change the sandbox's hub or agents; the sandbox
    passes everything they need as flags, and ``extra`` is the one deliberate way in.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KB_HUB_", "KB_AGENT_"))}
    # Log lines reach DIR/logs/ as they are written, not when a buffer fills.
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def run(args: Sequence[str], *, log: Path, env: Mapping[str, str] | None = None, shown: str = "") -> None:
    """Run one command to its end (an operator's command: ``kamaji-broker site add``, ``kubectl
    apply``), its output appended to ``log``; ``LaunchError`` with the end of the log if it fails,
    naming the command as ``shown`` (default: its arguments)."""
    with open(log, "ab") as out:
        done = subprocess.run(
            list(args), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, check=False
        )
    if done.returncode != 0:
        raise LaunchError(
            f"`{shown or ' '.join(args)}` failed with exit code {done.returncode}; end of {log}:\n{tail(log)}"
        )
