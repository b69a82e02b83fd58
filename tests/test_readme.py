"""README.md stays true: the two commands are there, every hub and agent flag is documented, and
the Docker commands read what engine.sh printed. (The module map is in the packages' faces:
tests/test_faces.py.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from pydantic_settings import BaseSettings

from agent.settings import AgentSettings
from hub.settings import HubSettings
from kamaji_broker import flags

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_the_two_commands() -> None:
    assert "make sandbox" in README and "make test" in README


@pytest.mark.parametrize("model", [HubSettings, AgentSettings], ids=["hub", "agent"])
def test_every_flag_is_documented(model: type[BaseSettings]) -> None:
    missing = [flags.flag(name) for name in model.model_fields if f"`{flags.flag(name)}`" not in README]
    assert missing == []


def test_no_placeholder_left() -> None:
    assert "SANDBOX-WALKTHROUGH" not in README and "BENCHMARK-TABLE" not in README


def _docker_commands() -> list[list[str]]:
    """The shell commands of the "With Docker" section, as argv."""
    section = README.split("\n## With Docker\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    return [
        shlex.split(line, comments=True) for block in blocks for line in block.splitlines() if line.strip()
    ]


def test_every_compose_command_reads_what_engine_sh_printed() -> None:
    """The images engine.sh chose reach every compose command, not just the first (without them
    ``run --rm e2e`` pulls the official image, which no registry may serve)."""
    commands = _docker_commands()
    (engine,) = [args for args in commands if "deploy/compose/engine.sh" in args]
    assert engine[0] == "deploy/compose/engine.sh", "root needs no sudo, and a machine may have none"
    assert engine[1] == ">", engine
    env_file = engine[2]
    compose = [args for args in commands if args[:2] == ["docker", "compose"]]
    assert len(compose) >= 5
    if env_file != ".env":  # the one compose reads from the checkout without being told
        missing = [" ".join(a) for a in compose if f"--env-file {env_file}" not in " ".join(a)]
        assert missing == [], f"compose commands without --env-file {env_file}"
