"""Fixtures of the container tests: the engine (or a skip naming why), and the compose stack.

Without an engine these tests skip with that reason, except where ``KB_REQUIRE_DOCKER`` is set
(``.ci/run`` sets it): there a missing engine is a failure, so CI cannot pass without them.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from testcontainers.compose import DockerCompose
from testcontainers.core.config import testcontainers_config

from tests.containers import engine
from tests.deploy import manifests as m


@pytest.fixture(scope="session")
def images() -> dict[str, str]:
    if not engine.answers():
        reason = f"no Docker engine answers (deploy/compose/{engine.ENGINE_SCRIPT.name} starts one as root)"
        if engine.required():
            pytest.fail(f"{reason}, and {engine.REQUIRED} is set", pytrace=False)
        pytest.skip(reason)
    # Ryuk, testcontainers' reaper, is an image no registry here serves; every fixture below
    # removes what it started, and the tests check that nothing is left.
    testcontainers_config.ryuk_disabled = True
    return engine.images()


class Stack(DockerCompose):
    """The compose topology on the host network, as the docs' "With Docker" page runs it."""

    def compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.compose_command_property, *args],
            cwd=self.context,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def started_at(self, service: str) -> str:
        container = self.get_container(service)
        assert container.ID
        return str(engine.inspect(container.ID)["State"]["StartedAt"])


@pytest.fixture(scope="session")
def compose_env(images: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> str:
    """The env file every compose command here reads: project name and images."""
    return str(engine.env_file(tmp_path_factory.mktemp("compose"), images))


@pytest.fixture(scope="package", autouse=True)
def _one_run_at_a_time() -> Iterator[None]:
    """Hold the images' tags and the stack's host ports while these tests run: a second
    ``make test`` beside this one waits here rather than rebuild ``kamaji-broker:dev`` from its
    own checkout under our tests or collide on the ports."""
    with engine.exclusive():
        yield


@pytest.fixture(scope="package")
def built(compose_env: str) -> dict[str, str]:
    """``docker compose build``: every image of the file, from this checkout."""
    compose = Stack(m.ROOT, compose_file_name=engine.COMPOSE_FILES, env_file=compose_env)
    with engine.timed("image builds"):
        done = compose.compose("build", timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    # The images the builds before this one left untagged (only ours: by the Dockerfile's label).
    engine.docker("image", "prune", "--force", "--filter", f"label={engine.IMAGE_LABEL}")
    return dict(engine.BUILT)


@pytest.fixture(scope="module")
def stack(built: dict[str, str], compose_env: str) -> Iterator[Stack]:
    compose = Stack(m.ROOT, compose_file_name=engine.COMPOSE_FILES, wait=True, env_file=compose_env)
    compose.compose("down", "--volumes", "--remove-orphans")  # a killed run's leftovers
    try:
        with engine.timed("compose up --wait"):
            compose.start()
    except subprocess.CalledProcessError as exc:
        logs = compose.compose("logs", "--no-color", "--tail", "60").stdout
        pytest.fail(f"compose up failed:\n{exc.stderr.decode(errors='replace')}\n{logs}", pytrace=False)
    try:
        yield compose
    finally:
        compose.stop()
