"""``kamaji-broker hub|agent``: the log flags (``--log-format``, a setting with its environment
variable; ``-v``, a count), parsed as the command line and the environment give them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.settings import AgentSettings
from common.files import keys
from hub.settings import HubSettings
from kamaji_broker import cli, flags


def _hub_args(tmp_path: Path) -> list[str]:
    keys.generate(tmp_path / "keys")
    for name in ("seed.nk", "kubeconfig"):
        (tmp_path / name).write_text("not read by the settings")
    return [
        "hub", "--nats-url", "nats://127.0.0.1:1", "--nats-seed", str(tmp_path / "seed.nk"),
        "--kubeconfig", str(tmp_path / "kubeconfig"), "--all-namespaces",
        "--signing-key", str(tmp_path / "keys" / keys.SIGNING_FILE),
        "--sealing-keys", str(tmp_path / "keys" / keys.SEALING_DIR),
    ]  # fmt: skip


def _agent_args(tmp_path: Path) -> list[str]:
    keys.generate(tmp_path / "keys")
    for name in ("seed.nk", "kubeconfig"):
        (tmp_path / name).write_text("not read by the settings")
    return [
        "agent", "--site", "site-a", "--nats-url", "nats://127.0.0.1:1",
        "--nats-seed", str(tmp_path / "seed.nk"), "--kubeconfig", str(tmp_path / "kubeconfig"),
        "--namespaces", "tenants",
        "--hub-public-keys", str(tmp_path / "keys" / keys.PUBLIC_FILE),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "env", "expected_format", "expected_verbose"),
    [
        ([], {}, "json", 0),
        (["--log-format", "text"], {}, "text", 0),
        ([], {"LOG_FORMAT": "text"}, "text", 0),
        (["--log-format", "json"], {"LOG_FORMAT": "text"}, "json", 0),
        (["-v"], {}, "json", 1),
        (["-vv", "--log-format=text"], {}, "text", 2),
        (["-v", "-v", "--verbose"], {}, "json", 3),
    ],
    ids=["defaults", "flag", "env", "flag-wins-over-env", "-v", "-vv", "counted"],
)
@pytest.mark.parametrize("command", ["hub", "agent"])
def test_log_flags(
    command: str,
    extra: list[str],
    env: dict[str, str],
    expected_format: str,
    expected_verbose: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = HubSettings if command == "hub" else AgentSettings
    prefix = str(model.model_config.get("env_prefix"))
    for name, value in env.items():
        monkeypatch.setenv(prefix + name, value)
    base = _hub_args(tmp_path) if command == "hub" else _agent_args(tmp_path)
    args = cli._parser().parse_args([*base, *extra])
    settings = flags.load(model, args)
    assert settings.log_format == expected_format
    assert args.verbose == expected_verbose


@pytest.mark.parametrize("command", ["hub", "agent"])
def test_a_bad_log_format_names_the_flag_and_exits_2(command: str, tmp_path: Path) -> None:
    base = _hub_args(tmp_path) if command == "hub" else _agent_args(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "kamaji_broker.cli", *base, "--log-format", "yaml"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        f"kamaji-broker {command}: error: --log-format: Input should be 'json' or 'text'"
    ]


def test_a_bad_log_format_in_the_environment_names_the_flag(tmp_path: Path) -> None:
    env = {**os.environ, "KB_AGENT_LOG_FORMAT": "logfmt"}
    out = subprocess.run(
        [sys.executable, "-m", "kamaji_broker.cli", *_agent_args(tmp_path)],
        capture_output=True, text=True, check=False, timeout=60, env=env,
    )  # fmt: skip
    assert out.returncode == 2
    assert "--log-format: Input should be 'json' or 'text'" in out.stderr


def test_a_bad_log_level_names_the_variable_and_exits_2(tmp_path: Path) -> None:
    """Checked right after the settings, before anything connects."""
    env = {**os.environ, "KB_LOG_LEVEL": "loud"}
    out = subprocess.run(
        [sys.executable, "-m", "kamaji_broker.cli", *_hub_args(tmp_path)],
        capture_output=True, text=True, check=False, timeout=60, env=env,
    )  # fmt: skip
    assert out.returncode == 2
    assert "KB_LOG_LEVEL: unknown level 'loud'" in out.stderr
