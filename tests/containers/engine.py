"""The Docker engine the container tests use, and the compose project they bring up on it.

The engine is whatever ``docker info`` answers; ``deploy/compose/engine.sh`` (run by ``.ci/run``)
starts one where there is none. Images: the official ones where the engine has or can pull them,
otherwise the ones that script builds; its last lines name them. Every container is on the host
network (docker-compose.host.yml), so the stack's ports are fixed: one stack on this machine at a
time, across test runs too (a lock file).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.deploy import manifests as m

ENGINE_SCRIPT = m.ROOT / "deploy" / "compose" / "engine.sh"
ENGINE_LOCK = Path("/var/lib/kamaji-broker-engine/lock")  # engine.sh's, when it runs as root
COMPOSE_FILES = ["docker-compose.yml", "docker-compose.host.yml"]
IMAGE_VARIABLES = ("KB_PYTHON_IMAGE", "KB_NATS_IMAGE")
PROJECT = "kamaji-broker-test"
BUILT = {"runtime": "kamaji-broker:dev", "sandbox": "kamaji-broker:sandbox"}
IMAGE_LABEL = "org.opencontainers.image.title=kamaji-broker"
LOCK = Path("/tmp/kamaji-broker-compose-host.lock")
TESTS = "tests/containers/"
TIMINGS: dict[str, float] = {}
CHOSEN: dict[str, str] = {}
"""Seconds per step (build, compose up, e2e, ...), printed at the end of the run for CI's log."""
# .ci/run sets it: there, a missing engine fails the container tests instead of skipping them.
REQUIRED = "KB_REQUIRE_DOCKER"


def answers() -> bool:
    try:
        done = subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def printed(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """What a run of engine.sh printed: the lines of a compose ``.env``."""
    assert done.returncode == 0, f"{ENGINE_SCRIPT.name} failed:\n{done.stdout}{done.stderr}"
    lines = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert set(lines) - {"COMPOSE_FILE"} == set(IMAGE_VARIABLES), done.stdout
    return lines


def images() -> dict[str, str]:
    """``KB_PYTHON_IMAGE`` and ``KB_NATS_IMAGE`` as engine.sh chooses them (building if need be);
    the compose files are the tests' own choice (``COMPOSE_FILES``)."""
    done = subprocess.run(
        ["bash", str(ENGINE_SCRIPT)], capture_output=True, text=True, timeout=540, check=False
    )
    chosen = {k: v for k, v in printed(done).items() if k in IMAGE_VARIABLES}
    CHOSEN.update(chosen)
    return chosen


@contextmanager
def exclusive() -> Iterator[None]:
    """Hold the images' tags and the host-network stack's ports (another ``make test`` beside
    this one waits here)."""
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def docker(*args: str, timeout: float = 120) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"docker {' '.join(args)}: {done.stderr.strip()}"
    return done.stdout


def inspect(container: str) -> dict[str, Any]:
    (found,) = json.loads(docker("inspect", container))
    return dict(found)


def leftovers(project: str) -> dict[str, list[str]]:
    """What of ``project`` the engine still has: containers, volumes, networks (by compose label)."""
    label = f"label=com.docker.compose.project={project}"
    return {
        "containers": docker("ps", "-a", "-q", "--filter", label).split(),
        "volumes": docker("volume", "ls", "-q", "--filter", label).split(),
        "networks": docker("network", "ls", "-q", "--filter", label).split(),
    }


def env_file(directory: Path, chosen: dict[str, str]) -> Path:
    path = directory / "compose.env"
    lines = [f"COMPOSE_PROJECT_NAME={PROJECT}", *(f"{k}={v}" for k, v in sorted(chosen.items()))]
    path.write_text("\n".join(lines) + "\n")
    return path


def required() -> bool:
    return os.environ.get(REQUIRED, "") not in ("", "0")


@contextmanager
def timed(step: str) -> Iterator[None]:
    start = time.monotonic()
    try:
        yield
    finally:
        TIMINGS[step] = time.monotonic() - start


def image_sizes(names: Sequence[str]) -> dict[str, int]:
    sizes = {}
    for name in names:
        done = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{.Size}}", name],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if done.returncode == 0:
            sizes[name] = int(done.stdout.strip())
    return sizes


def summary(stats: Mapping[str, Sequence[object]]) -> list[str]:
    """For CI's log: what the container tests did (each test's outcome), how long each step
    took, and the image sizes."""
    lines = []
    for outcome in ("passed", "failed", "error", "skipped"):
        for report in stats.get(outcome, ()):
            nodeid = str(getattr(report, "nodeid", ""))
            if nodeid.startswith(TESTS) and (getattr(report, "when", "") == "call" or outcome != "passed"):
                lines.append(f"{outcome.upper():8} {nodeid}")
    if TIMINGS:
        lines.append("steps: " + ", ".join(f"{k} {v:.1f} s" for k, v in TIMINGS.items()))
        sizes = image_sizes([*CHOSEN.values(), *BUILT.values()])
        lines.append("images: " + ", ".join(f"{k} {v / 1e6:.0f} MB" for k, v in sizes.items()))
    return lines
