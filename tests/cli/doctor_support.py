"""What the tests of `kamaji-broker doctor` share: running it as a child process, reading its
lines, and the setup of a real nats-server (operator mode, TLS) and the Kubernetes emulator
with the flags an agent of site-a would be given."""

from __future__ import annotations

import asyncio
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from common import bus
from common.files import keys as keyfiles
from protocol import subjects
from sandbox import kubeapi, natsd, ports
from tests import helpers


@dataclass
class Run:
    code: int
    out: str
    err: str

    def lines(self, outcome: str, check: str) -> list[str]:
        """The lines of ``check`` with ``outcome``, each with its fix line (if any), spaces
        squeezed: ``FAIL nats reachable refused: ...``."""
        rows = self.out.splitlines()
        found = []
        for i, row in enumerate(rows):
            if row.startswith(f"{outcome:<4}  {check} "):
                fix = rows[i + 1] if i + 1 < len(rows) and rows[i + 1].startswith("      fix:") else ""
                found.append(re.sub(r" {2,}", " ", f"{row}\n{fix}"))
        return found

    def failed(self) -> list[str]:
        """The names of the checks that FAILed, in order."""
        return [row[6:].split("  ")[0].strip() for row in self.out.splitlines() if row.startswith("FAIL  ")]

    def line(self, outcome: str, check: str) -> str:
        found = self.lines(outcome, check)
        if not found:
            raise AssertionError(f"no {outcome} {check!r} line in:\n{self.out}\n{self.err}")
        return found[0]


async def doctor(role: str, *args: str) -> Run:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kamaji_broker.cli", "doctor", role, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout=100)
    return Run(proc.returncode if proc.returncode is not None else -1, out.decode(), err.decode())


@dataclass
class Setup:
    url: str
    conf: Path
    prefix: str
    kubeconfig: Path
    keys: Path
    cluster: kubeapi.Server
    health_port: int
    """Where the agent's --listen puts its /readyz (which doctor reads): nothing listens there
    unless a test starts the agent with these flags."""

    def agent(
        self, *, site: str = "site-a", creds: Path | None = None, over: dict[str, str] | None = None
    ) -> list[str]:
        flags = {
            "--nats-url": self.url,
            "--nats-creds": str(creds or helpers.identity_file(self.conf, f"sites/{site}")),
            "--nats-ca-file": str(helpers.nats_tls().ca),
            "--kubeconfig": str(self.kubeconfig),
            "--namespaces": "tenants",
            "--site": site,
            "--hub-public-keys": str(self.keys / keyfiles.PUBLIC_FILE),
            "--prefix": self.prefix,
            "--listen": f"127.0.0.1:{self.health_port}",
            **(over or {}),
        }
        return [x for flag, value in flags.items() for x in (flag, value)]


async def prepare(
    secured_nats: tuple[natsd.NatsServer, Path], cluster: kubeapi.Server, tmp_path: Path
) -> Setup:
    # The default prefix: the server's users (``secured_nats``) were minted for it. Only site-a
    # gets a consumer; site-b has a credential and none (a fault in tests/cli/test_doctor.py).
    prefix = subjects.DEFAULT_PREFIX
    server, conf = secured_nats
    hub = await bus.connect(helpers.options(server.url, seed_file=conf / "hub.creds"), deadline=10)
    await bus.ensure_topology(hub, sites=["site-a"], prefix=prefix)
    await hub.close()
    keyfiles.generate(tmp_path / "keys")
    return Setup(
        server.url,
        conf,
        prefix,
        cluster.write_kubeconfig(tmp_path / "kubeconfig"),
        tmp_path / "keys",
        cluster,
        ports.free_port(),
    )
