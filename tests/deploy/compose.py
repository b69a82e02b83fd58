"""docker-compose.yml and Dockerfile as data: services, commands, volumes, stages.

Parsing only (PyYAML and a line reader for the Dockerfile); the tests decide what must hold.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

import yaml

from tests.deploy import manifests as m

COMPOSE = m.ROOT / "docker-compose.yml"
DOCKERFILE = m.ROOT / "Dockerfile"
DOCKERIGNORE = m.ROOT / ".dockerignore"


def services() -> dict[str, dict[str, Any]]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return dict(data["services"])


def argv(service: dict[str, Any]) -> list[str]:
    """Entrypoint + command of ``service`` as exec form (images' entrypoint: kamaji-broker)."""
    entrypoint = service.get("entrypoint", ["kamaji-broker"])
    command = service.get("command", [])
    return [*entrypoint, *command]


def shell_lines(service: dict[str, Any]) -> list[list[str]]:
    """The commands of a ``/bin/sh -ec`` service, one argv per line."""
    assert service["entrypoint"][:2] == ["/bin/sh", "-ec"]
    (script,) = service["command"]
    return [shlex.split(line) for line in script.splitlines() if line.strip()]


def option(args: list[str], name: str) -> str:
    """The value of ``--name VALUE`` or ``--name=VALUE`` in ``args``."""
    for i, arg in enumerate(args):
        if arg == name:
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    raise AssertionError(f"{name} not in {args}")


def options_all(args: list[str], name: str) -> list[str]:
    """Every value of a repeated ``--name VALUE`` / ``--name=VALUE``."""
    found = [args[i + 1] for i, a in enumerate(args[:-1]) if a == name]
    return found + [a.split("=", 1)[1] for a in args if a.startswith(name + "=")]


def options(args: list[str], name: str) -> list[str]:
    return [a.split("=", 1)[1] for a in args if a.startswith(name + "=")]


def port_of(listen: str) -> int:
    return int(listen.rsplit(":", 1)[1])


@dataclass
class Stage:
    name: str
    base: str
    lines: list[str] = field(default_factory=list)

    def instructions(self, keyword: str) -> list[str]:
        return [ln.split(None, 1)[1] for ln in self.lines if ln.split(None, 1)[0].upper() == keyword]


def stages() -> dict[str, Stage]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, flags=re.M))
    out: dict[str, Stage] = {}
    current: Stage | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            match = re.match(r"FROM (\S+) AS (\S+)", line, flags=re.I)
            assert match, line
            base = re.sub(r"\$\{(\w+)\}", lambda g: args[g.group(1)], match.group(1))
            current = out[match.group(2)] = Stage(match.group(2), base)
            if base in out:  # FROM an earlier stage: inherits its instructions
                current.lines = list(out[base].lines)
        elif current is not None:
            current.lines.append(line)
    return out


def ignored(path: str) -> bool:
    patterns = [
        p.strip() for p in DOCKERIGNORE.read_text().splitlines() if p.strip() and not p.startswith("#")
    ]
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in patterns)
