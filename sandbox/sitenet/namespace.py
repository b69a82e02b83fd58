"""A site's network namespace on this machine: made, used and removed with ``ip`` (iproute2).

``Namespace.create`` takes a free /23 (``sandbox.sitenet.plan``) under a lock shared by every
process of this machine (two test runs side by side never take the same one), adds the
namespace, a veth pair between it and this machine, and a route to its Service network, with
forwarding on this machine's end of the pair only (``ip_forward`` itself untouched), so one
namespace reaches another's addresses through this machine (a management cluster's Cluster API
probing a site's tenant API server);
``exec_prefix`` runs a command inside it (``ip netns exec`` gives it the namespace's own
``/etc/hosts``, which ``write_hosts`` keeps); ``delete`` removes it with its link and route.
A namespace whose making process is gone (a run killed before it could clean up) is removed by
the next ``create`` (see ``remove_stale``). Talks to the kernel through ``ip``; needs root.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import shutil
import subprocess
from pathlib import Path

from sandbox.sitenet import plan as nplan

__all__ = ["LOCK", "Namespace", "NetnsError"]

LOCK = Path("/run/lock/kamaji-broker-sitenet.lock")
NETNS_ETC = Path("/etc/netns")


class NetnsError(RuntimeError):
    """A namespace could not be made or changed: the message has the command and its error."""


def _ip(*args: str) -> str:
    ip = shutil.which("ip")
    if ip is None:
        raise NetnsError("`ip` (iproute2) is not installed: a site's network namespace is made with it")
    done = subprocess.run([ip, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NetnsError(f"`ip {' '.join(args)}` failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def _routes() -> list[ipaddress.IPv4Network]:
    out = []
    for route in json.loads(_ip("-j", "-4", "route", "show", "table", "all") or "[]"):
        dst = route.get("dst", "")
        if dst and dst != "default":
            with contextlib.suppress(ValueError):
                out.append(ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> list[str]:
    """Delete every namespace of ours whose making process has exited, with its link (and so
    its route); their names. A process of it still running (a killed run's server) keeps the
    namespace itself alive until it exits, but no longer reachable."""
    removed = []
    for line in _ip("netns", "list").splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith("kb-") or "x" not in name:
            continue
        try:
            pid = int(name[3:].split("x")[0], 16)
        except ValueError:
            continue
        if not _alive(pid):
            with contextlib.suppress(NetnsError):
                _ip("netns", "delete", name)
            with contextlib.suppress(NetnsError):
                _ip("link", "delete", "kbh" + name[3:])
            shutil.rmtree(NETNS_ETC / name, ignore_errors=True)
            removed.append(name)
    return removed


class Namespace:
    """One namespace: ``address`` is where its servers listen for this machine, ``services``
    its Service network; ``exec_prefix`` + a command runs the command inside it."""

    def __init__(self, plan: nplan.Plan, name: str, host_if: str, ns_if: str) -> None:
        self.plan = plan
        self.name = name
        self.host_if = host_if
        self.ns_if = ns_if
        self._hosts: dict[str, str] = {}

    @property
    def address(self) -> str:
        return self.plan.address

    @property
    def services(self) -> ipaddress.IPv4Network:
        return self.plan.services

    @property
    def hosts_file(self) -> Path:
        return NETNS_ETC / self.name / "hosts"

    def exec_prefix(self) -> list[str]:
        return [shutil.which("ip") or "ip", "netns", "exec", self.name]

    @classmethod
    def create(cls, index: int) -> Namespace:
        """Make namespace ``index`` of this process (see ``plan.names``)."""
        name, host_if, ns_if = nplan.names(os.getpid(), index)
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        with open(LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            remove_stale()
            plan = nplan.choose(_routes())
            made = cls(plan, name, host_if, ns_if)
            try:
                made._lay_out()
            except BaseException:
                made.delete()
                raise
        return made

    def _lay_out(self) -> None:
        link = self.plan.link.prefixlen
        self.hosts_file.parent.mkdir(parents=True, exist_ok=True)
        self.write_hosts({})
        _ip("netns", "add", self.name)
        _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        _ip("link", "set", self.ns_if, "netns", self.name)
        _ip("addr", "add", f"{self.plan.host_address}/{link}", "dev", self.host_if)
        _ip("link", "set", self.host_if, "up")
        # What arrives on this end may leave by another namespace's; gone with the link. An
        # iptables FORWARD chain that drops (Docker's policy) still stops it.
        forwarding = Path(f"/proc/sys/net/ipv4/conf/{self.host_if}/forwarding")
        try:
            forwarding.write_text("1\n")
        except OSError as exc:
            raise NetnsError(f"cannot turn forwarding on for {self.host_if} ({forwarding}): {exc}") from exc
        inside = ["netns", "exec", self.name, shutil.which("ip") or "ip"]
        _ip(*inside, "addr", "add", f"{self.plan.address}/{link}", "dev", self.ns_if)
        _ip(*inside, "link", "set", self.ns_if, "up")
        _ip(*inside, "link", "set", "lo", "up")
        _ip(*inside, "route", "add", "default", "via", self.plan.host_address)
        _ip("route", "add", str(self.plan.services), "via", self.plan.address)

    def add_address(self, address: str) -> None:
        """``address`` (one of ``services``) answered inside the namespace: a Service's cluster
        IP that a process there listens on."""
        if ipaddress.ip_address(address) not in self.plan.services:
            raise NetnsError(
                f"{address} is not in namespace {self.name}'s Service network {self.plan.services}"
            )
        with contextlib.suppress(NetnsError):  # already there
            _ip(
                "netns",
                "exec",
                self.name,
                shutil.which("ip") or "ip",
                "addr",
                "add",
                f"{address}/32",
                "dev",
                "lo",
            )

    def write_hosts(self, entries: dict[str, str]) -> None:
        """Host names inside the namespace (name → address) beside localhost's, written in place:
        a process started in it reads this file as its ``/etc/hosts`` (a bind mount of it)."""
        self._hosts.update(entries)
        lines = ["127.0.0.1 localhost", "::1 localhost"]
        lines += [f"{address} {host}" for host, address in sorted(self._hosts.items())]
        text = "\n".join(lines) + "\n"
        with open(self.hosts_file, "a+") as f:
            f.seek(0)
            f.truncate()
            f.write(text)

    def delete(self) -> None:
        """Remove the namespace, its veth pair and route (the kernel drops both with it), and its
        files; what is already gone is skipped."""
        with contextlib.suppress(NetnsError):
            _ip("netns", "delete", self.name)
        with contextlib.suppress(NetnsError):
            _ip("link", "delete", self.host_if)
        shutil.rmtree(NETNS_ETC / self.name, ignore_errors=True)
