"""README.md stays true: the two commands are there, and every hub and agent flag is documented."""

from __future__ import annotations

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
