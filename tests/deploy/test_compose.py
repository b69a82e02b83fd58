"""docker-compose.yml and Dockerfile fit the CLI and each other, and the topology really works.

Static: every ``kamaji-broker`` command and flag parses with the CLI's own parser, every KB_*
variable is a setting, and URLs, credential paths, ports, sites and volumes agree across
services. Dynamic (no Docker needed): the services run as local processes from their compose
definitions — init's commands, nats-server on the generated config, clusters.py, hub, agents —
with the volumes as directories and the ports moved to free ones, and the ``e2e`` service's
checks pass against them. The real thing, on a Docker engine: tests/containers.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic_settings import BaseSettings

from agent.settings import AgentSettings
from hub.settings import HubSettings
from kamaji_broker import cli
from sandbox import natsd, ports
from tests import helpers
from tests.deploy import compose as c
from tests.deploy import manifests as m

SERVICES = c.services()
AGENTS = {name: s for name, s in SERVICES.items() if name.startswith("agent-")}
RUNNERS = {"hub": SERVICES["hub"], **AGENTS}
SETTINGS: dict[str, type[BaseSettings]] = {"hub": HubSettings, "agent": AgentSettings}


def _init_lines() -> list[list[str]]:
    return c.shell_lines(SERVICES["init"])


def _sites_added() -> list[str]:
    return [args[3] for args in _init_lines() if args[1:3] == ["site", "add"]]


def _nats_config_args() -> list[str]:
    (args,) = [a for a in _init_lines() if a[1] == "nats-config"]
    return args


def test_every_kamaji_broker_command_parses() -> None:
    parser = cli._parser()
    commands = [*_init_lines(), *(c.argv(s) for s in RUNNERS.values())]
    for args in commands:
        assert args[0] == "kamaji-broker", args
        parsed = parser.parse_args(args[1:])  # exits (SystemExit) on an unknown flag
        assert parsed.command in {"keys", "nats-config", "site", "hub", "agent"}
    assert {a[1] for a in commands} == {"keys", "nats-config", "site", "hub", "agent"}


@pytest.mark.parametrize("name", sorted(RUNNERS))
def test_environment_names_are_settings(name: str) -> None:
    service = RUNNERS[name]
    command = c.argv(service)[1]
    model = SETTINGS[command]
    prefix = f"KB_{command.upper()}_"
    env = service["environment"]
    assert set(env) - {"KB_LOG_LEVEL"} <= {f"{prefix}{f.upper()}" for f in model.model_fields}
    assert all(isinstance(v, str) for v in env.values()), "quote every value (compose passes strings)"


def test_wiring_is_consistent() -> None:
    hub = SERVICES["hub"]["environment"]
    nats_dir = c.option(_nats_config_args(), "--dir")
    store = c.option(_nats_config_args(), "--store-dir")
    keys = c.option(next(a for a in _init_lines() if a[1] == "keys"), "--out")
    clusters = c.argv(SERVICES["clusters"])
    kube_dir = c.option(clusters, "--dir")
    sites = _sites_added()
    # NATS: the nats service runs the generated config; its store is on its own volume.
    nats = SERVICES["nats"]
    assert c.option(nats["command"], "--config") == f"{nats_dir}/nats-server.conf"
    assert any(
        v.split(":")[1] == store.rsplit("/", 1)[0] for v in nats["volumes"] if v.startswith("jetstream:")
    )
    port = int(c.option(_nats_config_args(), "--port")) if "--port" in _nats_config_args() else 4222
    # TLS: nats-config makes the CA and a certificate naming the host the clients dial.
    tls_dir = c.option(_nats_config_args(), "--tls-generate")
    assert "nats" in c.options_all(_nats_config_args(), "--tls-host")
    # Hub: the hub seed, the CA, the keys, mgmt's kubeconfig, every site.
    assert hub["KB_HUB_NATS_URL"] == f"tls://nats:{port}"
    assert hub["KB_HUB_NATS_CA_FILE"] == f"{tls_dir}/ca.crt"
    assert hub["KB_HUB_NATS_OPERATOR_DIR"] == f"{nats_dir}/hub", "operator mode: the hub mints"
    assert c.option(_nats_config_args(), "--auth") == "operator"
    assert hub["KB_HUB_SIGNING_KEY"] == f"{keys}/signing.key"
    assert hub["KB_HUB_SEALING_KEYS"] == f"{keys}/sealing"
    assert hub["KB_HUB_KUBECONFIG"] == f"{kube_dir}/mgmt.kubeconfig"
    assert hub["KB_HUB_SITES"].split(",") == sites
    assert hub["KB_HUB_STREAM_REPLICAS"] == "1", "one nats node here"
    # Agents: one per site added, each with its own seed and kubeconfig.
    assert sorted(e["environment"]["KB_AGENT_SITE"] for e in AGENTS.values()) == sites
    for name, service in AGENTS.items():
        env = service["environment"]
        site = env["KB_AGENT_SITE"]
        assert name == f"agent-{site}"
        assert env["KB_AGENT_NATS_URL"] == hub["KB_HUB_NATS_URL"]
        assert env["KB_AGENT_NATS_CA_FILE"] == hub["KB_HUB_NATS_CA_FILE"]
        # its own key in a Secret at the site, first from the bootstrap credential `site add` made
        assert env["KB_AGENT_NATS_BOOTSTRAP_CREDS"] == f"{nats_dir}/sites/{site}.bootstrap.creds"
        assert env["KB_AGENT_NATS_IDENTITY_SECRET"].split("/")[1]
        assert env["KB_AGENT_HUB_PUBLIC_KEYS"] == f"{keys}/hub-public-keys.json"
        assert env["KB_AGENT_KUBECONFIG"] == f"{kube_dir}/{site}.kubeconfig"
        assert env["KB_AGENT_NAMESPACES"] == c.option(clusters, "--namespace")
    assert c.option(clusters, "--sites").split(",") == sites
    assert c.option(clusters, "--site-manifests") == f"{nats_dir}/sites", "the Sites `site add` wrote"
    e2e = c.argv(SERVICES["e2e"])
    assert c.options(e2e, "--sites")[0].split(",") == sites
    assert c.options(e2e, "--kubeconfig-dir") == [kube_dir]
    assert c.options(e2e, "--namespace") == [c.option(clusters, "--namespace")]


def test_health_ports_line_up() -> None:
    """Hub and agents share the clusters service's network namespace: distinct ports, published
    there, probed by their healthchecks and by e2e."""
    listens = {
        name: c.port_of(s["environment"][f"KB_{c.argv(s)[1].upper()}_LISTEN"]) for name, s in RUNNERS.items()
    }
    assert len(set(listens.values())) == len(listens)
    published = {int(p.rsplit(":", 1)[1]) for p in SERVICES["clusters"]["ports"] if "-" not in p}
    assert published == set(listens.values())
    # The emulated API servers, for kubectl on the host: mgmt's port and one per site, in a range.
    (kube_range,) = [p for p in SERVICES["clusters"]["ports"] if "-" in p]
    first, last = (int(x) for x in kube_range.rsplit(":", 1)[1].split("-"))
    port = int(c.option(c.argv(SERVICES["clusters"]), "--port"))
    assert (first, last) == (port, port + len(_sites_added())), kube_range
    assert kube_range == f"127.0.0.1:{first}-{last}:{first}-{last}"
    for name, service in RUNNERS.items():
        assert service["network_mode"] == "service:clusters"
        assert f"http://127.0.0.1:{listens[name]}/readyz" in service["healthcheck"]["test"][-1]
    e2e = c.argv(SERVICES["e2e"])
    assert set(c.options(e2e, "--health")) == {f"http://127.0.0.1:{p}" for p in listens.values()}
    assert SERVICES["e2e"]["network_mode"] == "service:clusters"


def test_volumes_and_dependencies() -> None:
    for name, service in SERVICES.items():
        if name == "nats":
            continue
        assert "state:/state" in [v.removesuffix(":ro") for v in service["volumes"]], name
    writers = {n for n, s in SERVICES.items() if "state:/state" in s["volumes"]}
    assert writers == {"init", "clusters"}, "only they write; everything else mounts it read-only"
    assert SERVICES["nats"]["depends_on"]["init"]["condition"] == "service_completed_successfully"
    assert SERVICES["hub"]["depends_on"] == {
        "nats": {"condition": "service_healthy"},
        "clusters": {"condition": "service_healthy"},
    }
    for service in AGENTS.values():
        assert service["depends_on"] == {"hub": {"condition": "service_healthy"}}, "the hub creates consumers"
    for name in ("clusters", *RUNNERS, "e2e"):
        assert SERVICES[name]["read_only"] is True, name


def test_dockerfile_builds_what_compose_uses() -> None:
    stages = c.stages()
    assert stages["build"].base == stages["runtime"].base == "python:3.11-slim"
    for name in ("runtime", "sandbox"):
        stage = stages[name]
        assert stage.instructions("USER")[-1] == "10001:10001", f"{name} ends as the non-root user"
        assert stage.instructions("ENTRYPOINT") == ['["kamaji-broker"]']
    # The nats-server wheel (the `server` extra) only in the sandbox stage.
    assert not any("[server]" in r for r in stages["runtime"].instructions("RUN"))
    assert any("[server]" in r for r in stages["sandbox"].instructions("RUN"))
    # The build stage copies every package pyproject installs, none of it ignored.
    copied = [line.split()[0].rstrip("/") for line in stages["build"].instructions("COPY")]
    packages = set(helpers.PACKAGES)
    assert packages | {"pyproject.toml"} <= {p for line in copied for p in line.split()} | set(copied)
    for source in [*packages, "pyproject.toml", "README.md", "deploy/compose"]:
        assert (m.ROOT / source).exists() and not c.ignored(source), source
    # Compose: build targets exist; services running deploy/compose scripts use the stage that has them.
    (compose_copy,) = [ln for ln in stages["sandbox"].instructions("COPY") if "deploy/compose" in ln]
    target_dir = compose_copy.split()[-1].rstrip("/")
    for name, service in SERVICES.items():
        if "build" in service:
            assert service["build"]["target"] in stages, name
        if any(target_dir in a for a in c.argv(service)):
            assert service["build"]["target"] == "sandbox", name
            script = next(a for a in c.argv(service) if a.startswith(target_dir))
            assert (m.ROOT / "deploy" / "compose" / Path(script).name).is_file()


# -- the topology as local processes ---------------------------------------------------------------


def _free_port(count: int = 1) -> int:
    """A port p with p .. p+count-1 free on 127.0.0.1."""
    for _ in range(50):
        base = ports.free_port()
        try:
            for p in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
    raise RuntimeError("no free port range")


class Local:
    """Compose values moved onto this machine: volumes → directories, fixed ports → free ones."""

    def __init__(self, root: Path) -> None:
        self.dirs = {"/state": root / "state", "/data": root / "data"}
        self.ports: dict[int, int] = {}
        for service in RUNNERS.values():
            port = c.port_of(service["environment"][f"KB_{c.argv(service)[1].upper()}_LISTEN"])
            self.ports[port] = _free_port()
        self.nats_port = _free_port()
        self.kube_port = _free_port(1 + len(_sites_added()))
        (_, self.compose_dir) = next(
            ln.split() for ln in c.stages()["sandbox"].instructions("COPY") if "deploy/compose" in ln
        )

    def __call__(self, value: str) -> str:
        flag, eq, rest = value.partition("=")
        if value.startswith("--") and eq:
            return f"{flag}={self(rest)}"
        for container, local in self.dirs.items():
            if value == container or value.startswith(container + "/"):
                value = str(local) + value[len(container) :]
        if value.startswith(self.compose_dir):
            value = str(m.ROOT / "deploy" / "compose" / value[len(self.compose_dir) :].lstrip("/"))
        value = value.replace("tls://nats:4222", f"tls://127.0.0.1:{self.nats_port}")
        if value == "0.0.0.0":  # an address a container listens on: loopback on this machine
            return "127.0.0.1"
        return re.sub(
            r"(?:127\.0\.0\.1)?:(\d+)\b",
            lambda g: (
                f"127.0.0.1:{self.ports[int(g.group(1))]}" if int(g.group(1)) in self.ports else g.group(0)
            ),
            value,
        )

    def argv(self, args: list[str]) -> list[str]:
        args = [self(a) for a in args]
        if args[0] == "kamaji-broker":
            return [sys.executable, "-m", "kamaji_broker.cli", *args[1:]]
        if args[0] == "python":
            return [sys.executable, *args[1:]]
        return args

    def env(self, service: dict[str, Any]) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
        return {**base, **{k: self(v) for k, v in (service.get("environment") or {}).items()}}


def _wait(what: str, ready: Any, procs: dict[str, subprocess.Popen[bytes]], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, proc in procs.items():
            assert proc.poll() is None, f"{name} exited with {proc.returncode}"
        if ready():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} not ready within {timeout}s")


def _log_when(log: Path, text: str, procs: dict[str, subprocess.Popen[bytes]]) -> str:
    _wait(f"{text!r} in {log.name}", lambda: text in log.read_text(errors="replace"), procs)
    return log.read_text(errors="replace")


def test_nats_publishes_no_monitoring_port() -> None:
    """Clients only (TLS); the healthcheck reaches monitoring on the container's loopback."""
    nats = SERVICES["nats"]
    assert [p.rsplit(":", 1)[1] for p in nats["ports"]] == ["4222"]
    assert c.option(_nats_config_args(), "--monitor").startswith("127.0.0.1:")
    assert "--http_port" not in nats["command"] and "-m" not in nats["command"]


def _readyz(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    procs: dict[str, subprocess.Popen[bytes]] = {}
    yield procs
    for proc in reversed(procs.values()):
        proc.terminate()
    for proc in procs.values():
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_topology_runs_as_local_processes(
    tmp_path: Path, processes: dict[str, subprocess.Popen[bytes]]
) -> None:
    local = Local(tmp_path)
    for directory in local.dirs.values():
        directory.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()

    def start(name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        with open(logs / f"{name}.log", "wb") as out:
            processes[name] = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)

    for args in _init_lines():
        subprocess.run(local.argv(args), check=True, capture_output=True, timeout=60)
    nats = SERVICES["nats"]["command"]  # the official image runs its command as given
    assert nats[0] == "nats-server"
    config = local(c.option(nats, "--config"))
    monitor = _free_port()
    start("nats", [natsd.find_binary(), "--config", config, "-a", "127.0.0.1", "-p", str(local.nats_port),
                   "--http_port", str(monitor)])  # fmt: skip
    assert "TLS required for client connections" in _log_when(logs / "nats.log", "Server is ready", processes)
    clusters = local.argv(c.argv(SERVICES["clusters"]))
    clusters[clusters.index("--port") + 1] = str(local.kube_port)
    start("clusters", clusters, local.env(SERVICES["clusters"]))
    ready_file = local(re.findall(r"'(/state/[^']+)'", SERVICES["clusters"]["healthcheck"]["test"][-1])[0])
    _wait("nats", lambda: _readyz(f"http://127.0.0.1:{monitor}/healthz?js-enabled-only=true"), processes)
    _wait("clusters", lambda: Path(ready_file).exists(), processes)
    health = {
        name: re.findall(r"'(http://[^']+)'", s["healthcheck"]["test"][-1])[0] for name, s in RUNNERS.items()
    }
    start("hub", local.argv(c.argv(SERVICES["hub"])), local.env(SERVICES["hub"]))
    _wait("hub", lambda: _readyz(local(health["hub"])), processes)
    for name, service in AGENTS.items():
        start(name, local.argv(c.argv(service)), local.env(service))
    for name in AGENTS:
        _wait(name, lambda name=name: _readyz(local(health[name])), processes)
    e2e = local.argv(c.argv(SERVICES["e2e"]))
    e2e[-1] = "--timeout=30"
    done = subprocess.run(e2e, capture_output=True, text=True, timeout=90, env=local.env(SERVICES["e2e"]))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "e2e: every check passed" in done.stdout
    assert done.stdout.count("ok   ") == len(RUNNERS) + 6 * len(AGENTS)


# -- docker-compose.host.yml: the same topology on the host network ----------------------------------

HOST_OVERRIDE = m.ROOT / "docker-compose.host.yml"
NETWORK_KEYS = {"network_mode", "extra_hosts", "ports", "build", "command", "environment"}


def _override() -> dict[str, dict[str, Any]]:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!reset", lambda loader, node: "!reset")  # compose: drop the base value
    return dict(yaml.load(HOST_OVERRIDE.read_text(), Loader=Loader)["services"])


def test_the_host_override_changes_the_network_only() -> None:
    """Not a second topology: the same services, and of each only how it is reached."""
    override = _override()
    assert set(override) == set(SERVICES)
    for name, service in override.items():
        assert set(service) <= NETWORK_KEYS, name
        assert service["network_mode"] == "host", name
        assert service.get("build", {"network": "host"}) == {"network": "host"}, name
        if "ports" in SERVICES[name]:
            assert service["ports"] == "!reset", f"{name}: host networking publishes nothing"
        if "command" in service:  # nats: the same command, bound to loopback
            assert service["command"][: len(SERVICES[name]["command"])] == SERVICES[name]["command"]
            assert service["command"][len(SERVICES[name]["command"]) :] == ["--addr", "127.0.0.1"]
    for name, service in RUNNERS.items():
        (key,) = override[name]["environment"]
        assert key.endswith("_LISTEN") and key in service["environment"], name
        assert override[name]["environment"][key] == f"127.0.0.1:{c.port_of(service['environment'][key])}"
    assert SERVICES["clusters"]["environment"] == {"KB_CLUSTERS_ADDRESS": "0.0.0.0"}
    assert override["clusters"]["environment"] == {"KB_CLUSTERS_ADDRESS": "127.0.0.1"}
    # Clients dial tls://nats:4222: the name must resolve to loopback, where nats listens.
    for name, service in SERVICES.items():
        if "nats:4222" in str(service.get("environment")):
            assert "nats:127.0.0.1" in override[name]["extra_hosts"], name


def test_images_are_the_official_ones_unless_a_variable_says_otherwise() -> None:
    assert SERVICES["nats"]["image"] == "${KB_NATS_IMAGE:-nats:2.11-alpine}"
    for name, service in SERVICES.items():
        if "build" in service:
            assert service["build"]["args"] == {"PYTHON_IMAGE": "${KB_PYTHON_IMAGE:-python:3.11-slim}"}, name
    text = c.DOCKERFILE.read_text()
    assert not text.startswith("# syntax="), "a frontend image would be pulled on every build"
    stages = c.stages()
    # Only the build stage asks the index; the images install from its wheels.
    for name in ("runtime", "sandbox"):
        installs = [r for r in stages[name].instructions("RUN") if "pip install" in r]
        assert installs and all("--no-index --find-links /wheels" in r for r in installs), name
