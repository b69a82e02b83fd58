"""``kamaji-broker status --watch`` as a child process on the emulated management cluster: a look
per change (one JSON object per line with ``-o json``, one line per event otherwise) until
SIGINT, then the exit code of the last look; flags it cannot work with are named."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from common import kube as ckube
from common.kube import resources
from hub.api import crds as crdgen
from hub.api import site as site_api
from sandbox import kubeapi

ROOT = Path(__file__).resolve().parents[2]
STATUS = [sys.executable, "-m", "kamaji_broker.cli", "status"]


@pytest.fixture
async def mgmt(cluster: kubeapi.Server, tmp_path: Path) -> AsyncIterator[tuple[Path, ckube.Kube]]:
    for name in (crdgen.FILENAME, crdgen.SITE_FILENAME):
        await cluster.apply_crd(yaml.safe_load((ROOT / "deploy" / "crds" / name).read_text()))
    path = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    kube = await ckube.connect(in_cluster=False, kubeconfig=path)
    yield path, kube
    await kube.close()


async def start(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *STATUS, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT
    )


async def line(proc: asyncio.subprocess.Process) -> str:
    assert proc.stdout is not None
    got = await asyncio.wait_for(proc.stdout.readline(), 30)
    assert got, "status --watch ended"
    return got.decode().rstrip("\n")


async def stopped(proc: asyncio.subprocess.Process) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, err.decode()


async def test_with_json_each_look_is_an_object_on_a_line_until_interrupted(
    mgmt: tuple[Path, ckube.Kube],
) -> None:
    path, kube = mgmt
    proc = await start("--kubeconfig", str(path), "--watch", "-o", "json")
    first: dict[str, Any] = json.loads(await line(proc))
    assert (first["healthy"], first["sites"], first["controlPlanes"]) == (True, [], [])
    await kube.create(resources.SITE, site_api.manifest("site-a"))
    second = json.loads(await line(proc))
    assert [s["name"] for s in second["sites"]] == ["site-a"]
    assert second["healthy"] is False  # no heartbeat from its agent yet
    code, err = await stopped(proc)
    assert (code, err) == (1, "")  # the last look's verdict


async def test_without_a_terminal_it_prints_a_line_per_event(mgmt: tuple[Path, ckube.Kube]) -> None:
    path, kube = mgmt
    await kube.create(resources.SITE, site_api.manifest("site-a"))
    proc = await start("--kubeconfig", str(path), "--watch")
    assert (await line(proc)).endswith(
        "] site site-a: no heartbeat from its agent yet: is it running, for this site?"
    )
    assert (await line(proc)).endswith("] site site-a: none")
    await kube.delete(resources.SITE, "site-a")
    assert (await line(proc)).endswith("] site site-a: gone (its Site deleted, nothing placed there)")
    code, _ = await stopped(proc)
    assert code == 0  # nothing left, nothing unhealthy


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--watch", "--heartbeat-interval", "0"], "--heartbeat-interval must be more than 0 seconds"),
        (["--watch", "--nats-url", "tls://127.0.0.1:1"], "--nats-url needs the observer's identity"),
        (["--watch=yes"], "--watch: ignored explicit argument 'yes'"),
    ],
)
async def test_flags_it_cannot_watch_with_exit_2_naming_the_flag(
    mgmt: tuple[Path, ckube.Kube], args: list[str], named: str
) -> None:
    path, _ = mgmt
    proc = await start("--kubeconfig", str(path), *args)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2
    assert named in err.decode()
