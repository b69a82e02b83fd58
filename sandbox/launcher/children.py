"""The system's child processes: starting them, stopping them in order, and faults by name.

Owns the list of ``processes.Child`` the system started (recorded before each starts, so a
failed start is still stopped), the stop order (whoever talks to others first, what they talk
to last), the operator commands run once as subprocesses, the faults a test injects by child
name (kill, pause, resume, start again) and reading the children's logs for error lines. Talks
to the operating system through ``sandbox.processes``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from pathlib import Path

from sandbox import processes
from sandbox.launcher.layout import Layout
from sandbox.launcher.options import Options

__all__ = ["CLI", "Children"]

CLI = ("-m", "kamaji_broker.cli")
"""How a child runs ``kamaji-broker``: this interpreter, the installed package."""

# Stop order by name prefix: whoever talks to others goes first, what they talk to last.
_TIERS: dict[str, int] = {
    "agent": 0,
    "hub": 1,
    "kamaji": 2,
    "kwok": 2,
    "tenant": 2,
    "kubeapi": 3,
    "kube": 3,
    "nats": 4,
    "etcd": 4,
    "datastore": 4,
}


class Children(Layout):
    """Every child process of the system, by name: ``nats-server`` (``nats-0``... with
    ``nats_nodes`` > 1), ``hub`` (``hub-1``... for more replicas), ``agent-<site>``,
    ``kamaji-<site>``, ``kubeapi-<cluster>`` (or, for a real cluster, ``etcd-<cluster>``,
    ``kube-apiserver-<cluster>``, ``kube-controller-manager-<cluster>``)."""

    def __init__(self, directory: Path, options: Options) -> None:
        super().__init__(directory, options)
        self.children: list[processes.Child] = []

    async def _cli(self, *args: str) -> None:
        """Run one ``kamaji-broker`` operator command as a subprocess, as an operator would."""
        await asyncio.to_thread(_run_cli, list(args), log=self.log("setup"))

    def _spawn(
        self, name: str, args: list[str], *, health_url: str | None = None, ready_text: str | None = None
    ) -> processes.Child:
        child = processes.Child(
            name=name,
            args=args,
            log=self.log(name),
            env=processes.child_env(self.options.env),
            health_url=health_url,
            ready_text=ready_text,
        )
        # Recorded before it starts: a failed start still gets stopped by _stop_children().
        self.children.append(child)
        child.start()
        return child

    async def _ready(self, children: list[processes.Child]) -> None:
        await asyncio.gather(*(c.wait_ready(timeout=self.options.start_timeout) for c in children))

    async def _stop_children(self) -> None:
        """SIGTERM every child, tier by tier (``_TIERS``), SIGKILL after ``stop_timeout``."""
        tiers: list[list[processes.Child]] = []
        for child in reversed(self.children):
            tier = _TIERS.get(child.name.split("-", 1)[0], 9)
            while len(tiers) <= tier:
                tiers.append([])
            tiers[tier].append(child)
        for tier_children in tiers:
            for child in tier_children:
                child.terminate()
            timeout = self.options.stop_timeout
            await asyncio.gather(*(c.wait_stopped(timeout=timeout) for c in tier_children))
        self.children.clear()

    def failures(self) -> list[str]:
        """Children that exited although the system runs (not by an injected fault): a line
        each, with its log."""
        return [
            f"{c.name} (pid {c.pid}) exited with code {c.returncode}; see {c.log}"
            for c in self.children
            if c.returncode is not None and not c.injected
        ]

    # -- faults ------------------------------------------------------------------------------

    def child(self, name: str) -> processes.Child:
        """The child process called ``name`` (see the class)."""
        for child in self.children:
            if child.name == name:
                return child
        raise KeyError(f"no child {name!r}; the system has {', '.join(c.name for c in self.children)}")

    async def kill(self, name: str) -> None:
        """SIGKILL child ``name`` and reap it: a crash, no cleanup, its Lease and consumers left
        as they were."""
        await self.child(name).kill()

    def pause(self, name: str) -> None:
        """SIGSTOP child ``name``: connections stay open, nothing is answered."""
        self.child(name).pause()

    def resume(self, name: str) -> None:
        self.child(name).resume()

    async def retire(self, name: str) -> None:
        """SIGTERM child ``name`` and wait until it exits: stopped on purpose for good (the hub
        of a management cluster left behind by ``clusterctl move``), not counted as a crash."""
        child = self.child(name)
        child.injected = True
        child.terminate()
        await child.wait_stopped(timeout=self.options.stop_timeout)

    async def start_again(self, name: str) -> None:
        """Start child ``name`` again after ``kill`` with the same flags, ports and store (a
        restarted pod), and wait until it is ready."""
        await self.child(name).start_again(timeout=self.options.start_timeout)

    # -- logs --------------------------------------------------------------------------------

    def log_marks(self) -> dict[str, int]:
        """Where every child's log ends now; ``errors_since`` reads what came after."""
        return {c.name: c.log.stat().st_size if c.log.exists() else 0 for c in self.children}

    def errors_since(self, marks: Mapping[str, int]) -> list[str]:
        """Every line logged at error level after ``marks``, as ``<child>: <line>``."""
        found: list[str] = []
        for child in self.children:
            found += [
                f"{child.name}: {line}" for line in processes.errors(child.log, marks.get(child.name, 0))
            ]
        return found

    def recent_errors(self) -> list[str]:
        """The last error line of each child's log that has one, named by the child: the first
        place to look when something does not become Ready."""
        found = []
        for child in self.children:
            line = processes.last_error(child.log)
            if line:
                found.append(f"{child.name}: {line}")
        return found


def _run_cli(args: list[str], *, log: Path) -> None:
    shown = f"kamaji-broker {' '.join(args)}"
    processes.run([sys.executable, *CLI, *args], log=log, env=processes.child_env(), shown=shown)
