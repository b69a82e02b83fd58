"""Logs at their most verbose: no secret in any line, and every line about the control
plane carries it as fields, in both formats.

The sandbox topology runs as for ``kamaji-broker sandbox`` (every part a process, operator mode,
TLS), with ``-vv`` and ``--log-format json`` or ``text`` on the hub's and the agent's command
lines, until its control plane is Ready and its CAPI Secrets exist. Then every secret of that run
is gathered: the Secrets at the site (Kamaji's kubeconfigs and CA, the agent's identity Secret
with its NKey seed and JWT), the CAPI Secrets the hub wrote in the management cluster, and the
secret files the operator commands made (seeds, .creds, signing and sealing keys, TLS keys).
Each is cut into its long tokens (a PEM body line, a seed, a JWT, a base64 value), and every
base64 token decoded and cut again, so that a leak in any encoding and with any line breaks
still shows one. None may appear in the hub's or the agent's log; nor may anything shaped like
a PEM block, a JWT or an NKey seed.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest
import pytest_asyncio

from common.kube import resources
from sandbox.launcher import System
from sandbox.launcher.installs import EMULATED_IDENTITY_SECRET
from tests import systems

pytestmark = pytest.mark.asyncio(loop_scope="module")

SITE = "site-a"
NAME = f"{SITE}-1"
"""The control plane: RKCP ``default/site-a-1`` in the management cluster, TCP
``tenants/site-a-1`` at the site."""
PROCESSES = ("hub", f"agent-{SITE}")
_TOKEN = re.compile(rb"[A-Za-z0-9+/=_.-]{40,}")
_SHAPES = {
    "a PEM block": re.compile(r"-----BEGIN [A-Z ]+-----"),
    "a JWT": re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\."),
    "an NKey seed": re.compile(r"\bS[UAO][A-Z2-7]{56}\b"),
}
_SECRET_FILES = ("*.nk", "*.creds", "*.key", "*.jwt")


def tokens(blob: bytes, *, depth: int = 3) -> set[bytes]:
    """The long tokens of ``blob``, and those of each token that is base64 of something."""
    found: set[bytes] = set()
    for token in _TOKEN.findall(blob):
        found.add(token)
        if depth == 0:
            continue
        try:
            decoded = base64.b64decode(token, validate=True)
        except (binascii.Error, ValueError):
            continue
        found |= tokens(decoded, depth=depth - 1)
    return found


class Run:
    """One run's secrets (by where they came from) and its processes' log lines."""

    def __init__(self, log_format: str) -> None:
        self.log_format = log_format
        self.secrets: dict[str, set[bytes]] = {}
        self.lines: dict[str, list[str]] = {}

    def add(self, where: str, blobs: Iterable[bytes]) -> None:
        found = set().union(*(tokens(b) for b in blobs))
        assert found, f"{where}: no secret material read, the scan would prove nothing"
        self.secrets[where] = found


async def _secrets(world: System, run: Run) -> None:
    site_kube = world.site_kube(SITE)
    for namespace in ("tenants", "default"):
        for secret in (await site_kube.list(resources.SECRET, namespace=namespace)).items:
            values = [base64.b64decode(v) for v in (secret.get("data") or {}).values()]
            run.add(f"Secret {namespace}/{secret['metadata']['name']} at {SITE}", values)
    for secret in (await world.mgmt.list(resources.SECRET, namespace="default")).items:
        if secret["metadata"]["name"].startswith(NAME):  # the CAPI Secrets of the control plane
            values = [base64.b64decode(v) for v in (secret.get("data") or {}).values()]
            run.add(f"Secret default/{secret['metadata']['name']} in the management cluster", values)
    for pattern in _SECRET_FILES:
        for path in sorted(world.directory.rglob(pattern)):
            if path.is_file() and not path.name.endswith(".pub"):
                run.add(f"file {path.relative_to(world.directory)}", [path.read_bytes()])


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["json", "text"])
async def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Run]:
    result = Run(request.param)
    directory = tmp_path_factory.mktemp(f"logs-{request.param}") / "sandbox"
    args = ("-vv", "--log-format", request.param)
    async with systems.running(directory, sites=(SITE,), base=[(NAME, SITE)], args=args) as world:
        await _secrets(world, result)
        for process in PROCESSES:
            result.lines[process] = world.log(process).read_text().splitlines()
    names = set(result.secrets)
    assert f"Secret {EMULATED_IDENTITY_SECRET} at {SITE}" in names, "the agent's seed and JWT"
    assert any(n.startswith("Secret tenants/") and "kubeconfig" in n for n in names), "Kamaji's kubeconfig"
    assert any(n.startswith("Secret default/") and "management" in n for n in names), "the CAPI Secrets"
    assert any(n.endswith(".creds") for n in names) and any(n.endswith(".key") for n in names)
    yield result


def _fields(run: Run, line: str) -> tuple[str, str, dict[str, Any]]:
    """(logger, message, fields) of one line in the run's format; ("", line, {}) for a line that
    is not one (a traceback's)."""
    if run.log_format == "json":
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            return "", line, {}
        logger, message = doc.pop("logger"), doc.pop("message")
        return logger, message, {k: str(v) for k, v in doc.items() if k not in ("time", "level")}
    found = re.match(r"\S+Z (\w+) +(\S+)  (.*?)((?:  (?:\w+=(?:\"(?:[^\"\\]|\\.)*\"|\S+) ?)+))?$", line)
    if found is None:
        return "", line, {}
    pairs = re.findall(r"(\w+)=(\"(?:[^\"\\]|\\.)*\"|\S+)", found.group(4) or "")
    return found.group(2), found.group(3), {k: json.loads(v) if v.startswith('"') else v for k, v in pairs}


async def test_no_secret_of_the_run_in_any_log_line(run: Run) -> None:
    leaks = [
        f"{process}: {where} in line {n}"
        for process, lines in run.lines.items()
        for n, line in enumerate(lines, 1)
        for where, secrets in run.secrets.items()
        if any(s.decode() in line for s in secrets)
    ]
    assert leaks == []


async def test_nothing_shaped_like_a_secret_in_any_log_line(run: Run) -> None:
    found = [
        f"{process}: {shape} in line {n}"
        for process, lines in run.lines.items()
        for n, line in enumerate(lines, 1)
        for shape, pattern in _SHAPES.items()
        if pattern.search(line)
    ]
    assert found == []


async def test_the_logs_are_at_vv_in_the_format_asked(run: Run) -> None:
    """The scan read debug lines of ours and of the libraries -vv opens, so it covered them."""
    for process, lines in run.lines.items():
        parsed = [_fields(run, line) for line in lines]
        loggers = {logger for logger, _, _ in parsed if logger}
        assert len(loggers) >= 3, (process, loggers)
        assert any(logger.startswith(("asyncio", "aiohttp", "nats")) for logger in loggers), (
            process,
            loggers,
        )
        levels = {line.split()[1] for line in lines if run.log_format == "text" and line[:1].isdigit()}
        levels |= {json.loads(ln)["level"] for ln in lines if run.log_format == "json" and ln.startswith("{")}
        assert "debug" in levels, process


async def test_lines_about_the_control_plane_carry_it_as_fields(run: Run) -> None:
    """In the hub the RKCP ``default/site-a-1``, in the agent its TCP ``tenants/site-a-1`` (or its
    subject): every line that names one carries its namespace, name and site, and a line that
    names a sequence carries it as ``seq``."""
    wanted = {
        "hub": ("default", [f"default/{NAME}"]),
        f"agent-{SITE}": ("tenants", [f"tenants/{NAME}", f"tenants.{NAME}"]),
    }
    for process, (namespace, names) in wanted.items():
        parsed = [_fields(run, line) for line in run.lines[process]]
        about = [(m, f) for _, m, f in parsed if any(n in m for n in names)]
        assert about, f"{process}: no line names {names}"
        wrong = [
            m
            for m, f in about
            if (f.get("namespace"), f.get("name"), f.get("site")) != (namespace, NAME, SITE)
        ]
        assert wrong == [], process
        seqs = [(m, f, re.search(r"seq (\d+)", m)) for m, f in about]
        with_seq = [(m, f.get("seq"), found.group(1)) for m, f, found in seqs if found]
        assert with_seq, f"{process}: no line names an intent's sequence"
        assert [(m, got) for m, got, want in with_seq if got != want] == [], process
