"""deploy/README.md (the production walkthrough): every command it shows fits what exists."""

from __future__ import annotations

import re
import shlex

from kamaji_broker import cli
from tests.deploy import manifests as m

WALKTHROUGH = m.DEPLOY / "README.md"


def _commands() -> list[list[str]]:
    blocks = re.findall(r"```sh\n(.*?)```", WALKTHROUGH.read_text(), flags=re.S)
    text = "\n".join(blocks).replace("\\\n", " ")
    lines = [line.split(" > ")[0] for line in text.splitlines() if line.strip()]
    return [shlex.split(line, comments=True) for line in lines]


def test_every_kamaji_broker_command_parses() -> None:
    parser = cli._parser()
    used = set()
    for args in _commands():
        for part in " ".join(args).split("&&"):
            words = part.split()
            if words and words[0] == "kamaji-broker":
                used.add(parser.parse_args(words[1:]).command)
    # hub and agent run from the manifests; status and observer are the operator's, from a workstation.
    assert used == {"keys", "nats-config", "observer", "site", "status"}


def test_every_deploy_path_exists() -> None:
    paths = {w.split("=")[-1] for args in _commands() for w in args if "deploy/" in w}
    assert paths
    for path in paths:
        assert (m.ROOT / path).exists(), path


def test_the_walkthrough_is_in_order() -> None:
    headings = re.findall(r"^## (\d)\. (\w+)", WALKTHROUGH.read_text(), flags=re.M)
    assert [h[1] for h in headings][:5] == ["Hub", "NATS", "Site", "Hub", "Agent"]


def test_every_keys_action_is_shown_and_rotation_is_step_by_step() -> None:
    parser = cli._parser()
    shown = set()
    for args in _commands():
        for part in " ".join(args).split("&&"):
            words = part.split()
            if words[:2] == ["kamaji-broker", "keys"]:
                shown.add(parser.parse_args(words[1:]).keys_command)
    assert shown == {"generate", "retire"}
    text = WALKTHROUGH.read_text()
    section = text.split("## Key rotation after a compromise", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^\*\*(\d)\. ", section, flags=re.M)
    assert steps == [str(n) for n in range(1, 8)]
    # Retiring needs the Secrets replaced: `kubectl apply` keeps a retired key's file in them.
    assert "replace -f" in section and "keys retire" in section
